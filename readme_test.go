package eve_test

import (
	"bufio"
	"bytes"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// README.md marks each fenced code block the test builds with the file it
// becomes, and each ```go block it does not build as a fragment:
//
//	<!-- readme_test.go builds this as shop/main.go -->
//	<!-- readme_test.go: a fragment, not built -->
var (
	readmeFileMark     = regexp.MustCompile(`^<!-- readme_test\.go builds this as (\S+) -->$`)
	readmeFragmentMark = regexp.MustCompile(`^<!-- readme_test\.go: a fragment, not built -->$`)
)

// readmeExample is one marked block of README.md.
type readmeExample struct {
	path string // in the example module, e.g. shop/main.go
	line int    // of the opening fence
	text string
}

// readmeExamples returns README's marked blocks verbatim. A ```go block
// with neither mark is an error, so a new example cannot go unbuilt by
// accident.
func readmeExamples(readme []byte) ([]readmeExample, error) {
	var (
		out     []readmeExample
		prev    string
		cur     *readmeExample
		skip    bool // inside a block that is not built
		lineNum int
	)
	sc := bufio.NewScanner(bytes.NewReader(readme))
	for sc.Scan() {
		lineNum++
		line := sc.Text()
		switch {
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		case skip && line == "```":
			skip = false
		case skip:
		case strings.HasPrefix(line, "```"):
			lang := strings.TrimPrefix(line, "```")
			if m := readmeFileMark.FindStringSubmatch(prev); m != nil {
				cur = &readmeExample{path: m[1], line: lineNum}
				break
			}
			if lang == "go" && !readmeFragmentMark.MatchString(prev) {
				return nil, fmt.Errorf("README.md:%d: a ```go block without a mark: put %q (or %q) on the line before it",
					lineNum, "<!-- readme_test.go builds this as <dir>/<file>.go -->", "<!-- readme_test.go: a fragment, not built -->")
			}
			skip = true
		}
		prev = line
	}
	if cur != nil || skip {
		return nil, fmt.Errorf("README.md: the code block opened at line %d is not closed", lineNum)
	}
	return out, sc.Err()
}

// The README's code examples compile as written: its marked blocks become
// the files of a module that uses this one through a replace directive, as
// a new user's app would, and go vet and go test run on it. Where an
// example defines an eve.Main agent (func Agent), a test calls it, so its
// rules parse and its tools register.
func TestREADMEExamplesBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the README's examples with the go command")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	examples, err := readmeExamples(readme)
	if err != nil {
		t.Fatal(err)
	}
	if len(examples) == 0 {
		t.Fatal("README.md marks no example to build")
	}
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/readme\n\ngo 1.26.0\n\nrequire github.com/eve-temporal/eve v0.0.0\n\nreplace github.com/eve-temporal/eve => " + root + "\n"
	write := func(path string, b []byte) {
		t.Helper()
		path = filepath.Join(dir, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", []byte(gomod))
	// This module's sums cover every module the examples can reach.
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", sum)
	agents := map[string]bool{}
	for _, ex := range examples {
		if strings.HasSuffix(ex.path, ".go") {
			formatted, err := format.Source([]byte(ex.text))
			if err != nil {
				t.Fatalf("README.md:%d (%s) does not parse: %v", ex.line, ex.path, err)
			}
			if !bytes.Equal(formatted, []byte(ex.text)) {
				t.Errorf("README.md:%d (%s) is not gofmt'ed; write it as:\n%s", ex.line, ex.path, formatted)
			}
			if strings.Contains(ex.text, "\nfunc Agent() (*agent.Agent, error) {") {
				agents[filepath.Dir(ex.path)] = true
			}
		}
		write(ex.path, []byte(ex.text))
	}
	for d := range agents {
		write(d+"/readme_agent_test.go", []byte(`package main

import "testing"

func TestAgent(t *testing.T) {
	a, err := Agent()
	if err != nil {
		t.Fatalf("Agent: %v", err)
	}
	if a.Name == "" || a.Tools == nil || a.Model == nil {
		t.Fatalf("Agent() = %+v: want a name, tools and a model", a)
	}
}
`))
	}

	// The module cache holds every dependency (they are this module's);
	// -mod=mod lets go fill in the example module's indirect requirements.
	var flags []string
	for _, f := range strings.Fields(os.Getenv("GOFLAGS")) {
		if !strings.HasPrefix(f, "-mod=") {
			flags = append(flags, f)
		}
	}
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS="+strings.Join(append(flags, "-mod=mod"), " "))
	for _, args := range [][]string{{"vet", "./..."}, {"test", "-count=1", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s in the module of README.md's examples: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// The extraction itself: marked blocks verbatim, fragments and other
// languages skipped, an unmarked Go block refused.
func TestREADMEExamplesExtraction(t *testing.T) {
	md := "text\n\n<!-- readme_test.go builds this as app/main.go -->\n```go\npackage main\n\nfunc main() {}\n```\n\n" +
		"```sh\ngo build\n```\n\n<!-- readme_test.go: a fragment, not built -->\n```go\nx := ...\n```\n\n" +
		"<!-- readme_test.go builds this as app/rules.yaml -->\n```yaml\nname: app\n```\n"
	got, err := readmeExamples([]byte(md))
	if err != nil {
		t.Fatal(err)
	}
	want := []readmeExample{{"app/main.go", 4, "package main\n\nfunc main() {}\n"}, {"app/rules.yaml", 20, "name: app\n"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("examples %+v, want %+v", got, want)
	}
	if _, err := readmeExamples([]byte("```go\nx := 1\n```\n")); err == nil || !strings.Contains(err.Error(), "README.md:1") {
		t.Fatalf("an unmarked go block: %v, want an error naming its line", err)
	}
	if _, err := readmeExamples([]byte("<!-- readme_test.go builds this as a/b.go -->\n```go\npackage a\n")); err == nil {
		t.Fatal("an unclosed block: no error")
	}
}
