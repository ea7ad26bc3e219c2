package tools

import (
	"testing"
	"time"
)

func TestReminderTimes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ds ...time.Duration) []time.Time {
		var out []time.Time
		for _, d := range ds {
			out = append(out, t0.Add(d))
		}
		return out
	}
	for _, c := range []struct {
		name     string
		r        *Reminders
		deadline time.Duration
		want     []time.Time
	}{
		{"none", nil, time.Hour, nil},
		{"no deadline", &Reminders{Before: []time.Duration{time.Minute}}, 0, nil},
		{"before, sorted, repeats and out-of-range dropped", &Reminders{Before: []time.Duration{time.Minute, 30 * time.Minute, time.Minute, 2 * time.Hour}}, time.Hour, at(30*time.Minute, 59*time.Minute)},
		{"every and before merged", &Reminders{Before: []time.Duration{20 * time.Minute}, Every: 20 * time.Minute}, time.Hour, at(20*time.Minute, 40*time.Minute)},
		{"at most MaxReminders, the latest", &Reminders{Every: time.Minute}, 100 * time.Minute, at(func() []time.Duration {
			var ds []time.Duration
			for m := 100 - MaxReminders; m < 100; m++ {
				ds = append(ds, time.Duration(m)*time.Minute)
			}
			return ds
		}()...)},
	} {
		var deadline time.Time
		if c.deadline > 0 {
			deadline = t0.Add(c.deadline)
		}
		got := c.r.Times(t0, deadline)
		if len(got) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
			continue
		}
		for i := range got {
			if !got[i].Equal(c.want[i]) {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
				break
			}
		}
	}
	for _, bad := range []*Reminders{{}, {Before: []time.Duration{0}}, {Every: time.Millisecond}} {
		if bad.Check() == nil {
			t.Errorf("Check(%+v) = nil, want an error", bad)
		}
	}
}
