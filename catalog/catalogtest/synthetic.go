package catalogtest

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"

	"github.com/eve-temporal/eve/catalog"
)

// vocabulary gives synthetic tools varied descriptions and parameter names.
var vocabulary = strings.Fields(`account invoice customer order payment refund subscription ticket
	contact lead deal pipeline campaign audience segment report dashboard metric alert incident
	deployment build release branch commit review comment thread document folder file spreadsheet
	row column sheet table record note task project milestone sprint board card list member team
	user group role permission token webhook event schedule reminder booking reservation room
	venue guest flight hotel itinerary shipment package tracking warehouse inventory product price
	catalog coupon discount cart checkout transaction ledger balance budget expense receipt tax
	employee candidate interview offer payroll timesheet leave survey response form question answer
	article post page site domain certificate server cluster database query index backup snapshot
	image video audio transcript translation summary sentiment forecast weather location map route`)

var verbs = strings.Fields(`get list create update delete search find send archive export import sync
	approve reject assign close reopen merge cancel refund schedule publish share upload download`)

// Synthetic returns n valid, distinct definitions modelled on the fixture:
// the fixture's tools repeated across toolkits "tk0000", "tk0001", ..., each
// copy with a distinct extra parameter and description words drawn
// deterministically (seeded) from a business vocabulary. For benchmarks.
func Synthetic(n int) []catalog.Definition {
	base := Definitions()
	r := rand.New(rand.NewSource(42))
	out := make([]catalog.Definition, 0, n)
	for i := 0; len(out) < n; i++ {
		tk := fmt.Sprintf("tk%04d", i)
		for _, d := range base {
			if len(out) == n {
				break
			}
			_, tool, _ := catalog.SplitName(d.Name)
			noun := vocabulary[r.Intn(len(vocabulary))]
			verb := verbs[r.Intn(len(verbs))]
			d.Name = tk + "." + tool + "_" + verb + "_" + noun
			d.Toolkit = tk
			d.Description = fmt.Sprintf("%s Works with the %s %s and related %s records.", d.Description, verb, noun, vocabulary[r.Intn(len(vocabulary))])
			d.InputSchema = withProperty(d.InputSchema, noun+"Id")
			out = append(out, d)
		}
	}
	return out
}

// withProperty adds an optional string property to an object schema.
func withProperty(schema json.RawMessage, name string) json.RawMessage {
	var m map[string]any
	if err := json.Unmarshal(schema, &m); err != nil {
		panic(err)
	}
	props, _ := m["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
		m["properties"] = props
	}
	props[name] = map[string]any{"type": "string", "description": "Identifier of the " + name + "."}
	b, _ := json.Marshal(m)
	return b
}
