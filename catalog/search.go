package catalog

import (
	"container/heap"
	"math"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Search ranking: BM25F over four fields. Each field's term frequency is
// length-normalised with its own b and weighted by its boost; the weighted
// sum goes through one BM25 saturation (k1) and is multiplied by the term's
// IDF. Everything but the query is computed when the catalog loads, so a
// query only sums precomputed per-(term, tool) scores.
const (
	bm25K1 = 1.2

	boostName        = 3.0
	boostCapability  = 2.0
	boostParams      = 1.5
	boostDescription = 1.0

	bName        = 0.3
	bCapability  = 0.3
	bParams      = 0.5
	bDescription = 0.75
)

const (
	fieldName = iota
	fieldCapability
	fieldParams
	fieldDescription
	numFields
)

var fieldBoost = [numFields]float64{boostName, boostCapability, boostParams, boostDescription}
var fieldB = [numFields]float64{bName, bCapability, bParams, bDescription}

type posting struct {
	doc   int32
	score float64 // idf * saturated BM25F term frequency
}

type searchIndex struct {
	terms    map[string]int32
	postings [][]posting
	scratch  sync.Pool // *scoreScratch
	n        int
}

type scoreScratch struct {
	scores  []float64
	touched []int32
}

func buildIndex(c *Catalog) *searchIndex {
	n := len(c.entries)
	idx := &searchIndex{terms: map[string]int32{}, n: n}
	// Pass 1: per document, the term counts of each field (terms interned
	// as ids), field lengths, and document frequencies.
	type termCount struct {
		id int32
		tf [numFields]int32
	}
	docTerms := make([][]termCount, n)
	docLen := make([][numFields]int32, n)
	var df []int32
	var total [numFields]float64
	local := map[int32]int{} // term id -> index in the current doc's counts
	for i, e := range c.entries {
		fields := [numFields][]string{
			fieldName:        tokenize(strings.ReplaceAll(e.def.Name, ".", " "), false),
			fieldCapability:  tokenize(e.def.Capability, false),
			fieldParams:      paramTokens(e.input.tree),
			fieldDescription: tokenize(e.def.Description, true),
		}
		var counts []termCount
		clear(local)
		for f, toks := range fields {
			for _, t := range toks {
				id, ok := idx.terms[t]
				if !ok {
					id = int32(len(df))
					idx.terms[t] = id
					df = append(df, 0)
				}
				k, ok := local[id]
				if !ok {
					k = len(counts)
					local[id] = k
					counts = append(counts, termCount{id: id})
					df[id]++
				}
				counts[k].tf[f]++
			}
			docLen[i][f] = int32(len(toks))
			total[f] += float64(len(toks))
		}
		docTerms[i] = counts
	}
	var avg [numFields]float64
	for f := range avg {
		avg[f] = 1
		if n > 0 && total[f] > 0 {
			avg[f] = total[f] / float64(n)
		}
	}
	// Pass 2: per (term, document), the final BM25F contribution.
	idf := make([]float64, len(df))
	for id, d := range df {
		// BM25 IDF, kept positive (Lucene's form).
		idf[id] = math.Log(1 + (float64(n)-float64(d)+0.5)/(float64(d)+0.5))
	}
	idx.postings = make([][]posting, len(df))
	for id, d := range df {
		idx.postings[id] = make([]posting, 0, d)
	}
	for i, counts := range docTerms {
		var norm [numFields]float64
		for f := range norm {
			norm[f] = 1 - fieldB[f] + fieldB[f]*float64(docLen[i][f])/avg[f]
		}
		for _, tc := range counts {
			w := 0.0
			for f := 0; f < numFields; f++ {
				if tc.tf[f] > 0 {
					w += fieldBoost[f] * float64(tc.tf[f]) / norm[f]
				}
			}
			idx.postings[tc.id] = append(idx.postings[tc.id], posting{doc: int32(i), score: idf[tc.id] * w * (bm25K1 + 1) / (w + bm25K1)})
		}
	}
	idx.scratch.New = func() any {
		return &scoreScratch{scores: make([]float64, n)}
	}
	return idx
}

// paramTokens tokenizes every property name in a schema, recursively.
func paramTokens(root *object) []string {
	var out []string
	walkSchemas(root, "", func(node *object, _ string) {
		if props, ok := node.obj("properties"); ok {
			for _, k := range props.keys {
				out = append(out, tokenize(k, false)...)
			}
		}
	})
	return out
}

// Search ranks tools for a query with BM25F over name, capability,
// description and parameter names (boosts: name 3, capability 2, params 1.5,
// description 1). Filters apply first; ties are broken by name, so the order
// is deterministic. A query without searchable words returns the filtered
// tools in name order.
func (c *Catalog) Search(opts SearchToolsOptions) (SearchToolsResult, error) {
	limit := opts.Limit
	if limit <= 0 {
		limit = DefaultSearchLimit
	}
	keep, err := c.toolkitFilter(opts.Toolkits)
	if err != nil {
		return SearchToolsResult{}, err
	}
	allowed := func(doc int32) bool {
		e := c.entries[doc]
		if keep != nil && !keep[e.tk] {
			return false
		}
		return opts.Capability == "" || e.def.Capability == opts.Capability
	}
	res := SearchToolsResult{Tools: []Definition{}}
	terms := dedupe(tokenize(opts.Query, true))
	if len(terms) == 0 {
		for i := range c.entries {
			if len(res.Tools) == limit {
				break
			}
			if allowed(int32(i)) {
				res.Tools = append(res.Tools, c.entries[i].def)
				res.Scores = append(res.Scores, 0)
			}
		}
		return res, nil
	}

	idx := c.index
	sc := idx.scratch.Get().(*scoreScratch)
	defer func() {
		for _, d := range sc.touched {
			sc.scores[d] = 0
		}
		sc.touched = sc.touched[:0]
		idx.scratch.Put(sc)
	}()
	for _, t := range terms {
		id, ok := idx.terms[t]
		if !ok {
			continue
		}
		for _, p := range idx.postings[id] {
			if sc.scores[p.doc] == 0 {
				if !allowed(p.doc) {
					continue
				}
				sc.touched = append(sc.touched, p.doc)
			}
			sc.scores[p.doc] += p.score
		}
	}
	h := hitHeap{}
	for _, d := range sc.touched {
		hit := hit{doc: d, score: sc.scores[d]}
		if len(h) < limit {
			heap.Push(&h, hit)
		} else if better(hit, h[0]) {
			h[0] = hit
			heap.Fix(&h, 0)
		}
	}
	out := make([]hit, len(h))
	for i := len(h) - 1; i >= 0; i-- {
		out[i] = heap.Pop(&h).(hit)
	}
	for _, ht := range out {
		res.Tools = append(res.Tools, c.entries[ht.doc].def)
		res.Scores = append(res.Scores, ht.score)
	}
	return res, nil
}

type hit struct {
	doc   int32
	score float64
}

// better orders hits: higher score first, then lower doc (entries are sorted
// by name, so that is name order).
func better(a, b hit) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.doc < b.doc
}

// hitHeap is a min-heap by better: the root is the worst kept hit.
type hitHeap []hit

func (h hitHeap) Len() int           { return len(h) }
func (h hitHeap) Less(i, j int) bool { return better(h[j], h[i]) }
func (h hitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *hitHeap) Push(x any)        { *h = append(*h, x.(hit)) }
func (h *hitHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func dedupe(s []string) []string {
	seen := make(map[string]bool, len(s))
	out := s[:0]
	for _, t := range s {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// stopWords are dropped from descriptions and queries.
var stopWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an and are as at be by can do does for from has have how i if in into is it its
		me my of on or our so than that the their them then there these this those to us use used uses using was
		we were what when where which while who will with you your`) {
		stopWords[w] = true
	}
}

// tokenize splits text into lowercase terms: at every character that is
// not a letter or digit (so dots, underscores, hyphens and spaces split),
// and at camelCase boundaries ("sendEmail" -> send, email; "HTMLBody" ->
// html, body). Terms are lightly stemmed (plural "s"); one-character terms
// are dropped, and so are stop words when stop is set.
func tokenize(s string, stop bool) []string {
	var out []string
	emit := func(w string) {
		if len(w) < 2 {
			return
		}
		w = strings.ToLower(w)
		if stop && stopWords[w] {
			return
		}
		out = append(out, stem(w))
	}
	start := -1
	var prev rune
	for i, r := range s {
		alnum := unicode.IsLetter(r) || unicode.IsDigit(r)
		if !alnum {
			if start >= 0 {
				emit(s[start:i])
				start = -1
			}
			prev = r
			continue
		}
		if start < 0 {
			start = i
		} else if unicode.IsUpper(r) {
			if unicode.IsLower(prev) || unicode.IsDigit(prev) {
				emit(s[start:i])
				start = i
			} else if unicode.IsUpper(prev) {
				// "HTMLBody": split before the 'B' when a lowercase letter follows.
				next, _ := utf8.DecodeRuneInString(s[i+utf8.RuneLen(r):])
				if unicode.IsLower(next) {
					emit(s[start:i])
					start = i
				}
			}
		}
		prev = r
	}
	if start >= 0 {
		emit(s[start:])
	}
	return out
}

// stem removes English plural endings: "emails" -> "email", "replies" ->
// "reply", "boxes" -> "box"; words ending in "ss", "us" or "is" are kept.
func stem(w string) string {
	n := len(w)
	switch {
	case n <= 3:
		return w
	case strings.HasSuffix(w, "ies") && n > 4:
		return w[:n-3] + "y"
	case strings.HasSuffix(w, "sses"), strings.HasSuffix(w, "xes"), strings.HasSuffix(w, "ches"), strings.HasSuffix(w, "shes"):
		return w[:n-2]
	case strings.HasSuffix(w, "ss"), strings.HasSuffix(w, "us"), strings.HasSuffix(w, "is"):
		return w
	case strings.HasSuffix(w, "s"):
		return w[:n-1]
	}
	return w
}
