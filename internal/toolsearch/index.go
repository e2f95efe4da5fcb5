// Package toolsearch owns ranked search over tool definitions: a tokenizer
// for identifiers and prose (tokenize.go), per-upstream index segments
// built once per catalog change, and BM25F ranking across segments.
//
// Why a small BM25 of our own rather than a library: what is indexed is a
// few thousand short documents in five fields, queried by a handful of
// words; bleve brings an analysis pipeline, a storage layer and dozens of
// dependencies for that, and would still need our identifier tokenizer.
// Segments also give what a route needs cheaply: a route's index is its
// upstreams' segments, so a list_changed re-indexes one upstream only and
// routes over different upstream sets share segments. Collection statistics
// (document frequency, average field length) are summed over the searched
// segments at query time, so the scores are those of one index over them.
package toolsearch

import (
	"container/heap"
	"encoding/json"
	"math"
	"sort"
	"strings"
)

// Fields of a tool document.
const (
	FieldName = iota
	FieldTitle
	FieldDescription
	FieldParams // input-schema property names and descriptions
	FieldUpstream
	numFields
)

// BM25F parameters: a name or title match counts most; descriptions and
// parameter text are long, so their length is normalised more. The
// upstream field (one or two words) is not length-normalised.
var (
	weights = [numFields]float64{3.0, 2.0, 1.0, 0.5, 1.5}
	bField  = [numFields]float64{0.3, 0.3, 0.75, 0.75, 0}
)

const k1 = 1.2

// Doc is one tool as indexed.
type Doc struct {
	Name        string // the upstream's own name
	Title       string
	Description string
	Params      string // property names and descriptions, space separated
}

// ParseTool reads the indexed fields of a tools/list item; false when it
// has no name. The item itself is not kept.
func ParseTool(item []byte) (Doc, bool) {
	var t struct {
		Name        string `json:"name"`
		Title       string `json:"title"`
		Description string `json:"description"`
		Annotations struct {
			Title string `json:"title"`
		} `json:"annotations"`
		InputSchema schema `json:"inputSchema"`
	}
	if json.Unmarshal(item, &t) != nil || t.Name == "" {
		return Doc{}, false
	}
	title := t.Title
	if title == "" {
		title = t.Annotations.Title
	}
	var params strings.Builder
	t.InputSchema.text(&params, 0)
	return Doc{Name: t.Name, Title: title, Description: t.Description, Params: params.String()}, true
}

// schema is what of an input schema is indexed: property names and
// descriptions, two levels deep (an object's properties, and those of an
// object or array-of-objects property).
type schema struct {
	Description string            `json:"description"`
	Properties  map[string]schema `json:"properties"`
	Items       *schema           `json:"items"`
}

func (s *schema) text(b *strings.Builder, depth int) {
	if depth > 2 {
		return
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := s.Properties[n]
		b.WriteString(n)
		b.WriteByte(' ')
		if p.Description != "" {
			b.WriteString(p.Description)
			b.WriteByte(' ')
		}
		p.text(b, depth+1)
	}
	if s.Items != nil {
		s.Items.text(b, depth+1)
	}
}

// posting is one document's term frequencies in each field.
type posting struct {
	doc uint32
	tf  [numFields]uint8
}

// Segment is the index of one upstream's tools. It is immutable once
// built, so searches share it without locks.
type Segment struct {
	upstream string
	names    []string
	lens     [][numFields]uint16 // per document, tokens per field
	totLen   [numFields]int
	postings map[string][]posting
}

// NewSegment indexes docs, the tools of upstream.
func NewSegment(upstream string, docs []Doc) *Segment {
	s := &Segment{upstream: upstream, names: make([]string, len(docs)), lens: make([][numFields]uint16, len(docs)), postings: map[string][]posting{}}
	upTokens := Tokens(upstream)
	var toks []string
	tf := map[string]*[numFields]uint8{}
	for i, d := range docs {
		s.names[i] = d.Name
		clear(tf)
		for f, text := range [numFields]string{d.Name, d.Title, d.Description, d.Params} {
			if f == FieldUpstream {
				toks = upTokens
			} else {
				toks = appendTokens(toks[:0:0], text)
			}
			s.lens[i][f] = uint16(min(len(toks), math.MaxUint16))
			s.totLen[f] += int(s.lens[i][f])
			for _, t := range toks {
				c := tf[t]
				if c == nil {
					c = new([numFields]uint8)
					tf[t] = c
				}
				if c[f] < math.MaxUint8 {
					c[f]++
				}
			}
		}
		for t, c := range tf {
			s.postings[t] = append(s.postings[t], posting{doc: uint32(i), tf: *c})
		}
	}
	return s
}

// Upstream is the upstream the segment indexes.
func (s *Segment) Upstream() string { return s.upstream }

// Len is the number of documents.
func (s *Segment) Len() int { return len(s.names) }

// Name is document i's tool name.
func (s *Segment) Name(i int) string { return s.names[i] }

// Hit is one ranked tool: document Doc of segment Seg (indexes into the
// segments searched).
type Hit struct {
	Seg, Doc int
	Score    float64
}

// Search ranks the documents of segs against query with BM25F and returns
// the best k (all matches when k <= 0), best first; equal scores are
// ordered by upstream name, then tool name, so results are deterministic.
// A document matches when it contains at least one query term.
func Search(segs []*Segment, query string, k int) []Hit {
	terms := uniq(Tokens(query))
	if len(terms) == 0 || len(segs) == 0 {
		return nil
	}
	n := 0
	var tot [numFields]int
	for _, s := range segs {
		n += s.Len()
		for f := range tot {
			tot[f] += s.totLen[f]
		}
	}
	if n == 0 {
		return nil
	}
	var avg [numFields]float64
	for f := range avg {
		avg[f] = math.Max(float64(tot[f])/float64(n), 1)
	}
	scores := make([][]float64, len(segs))
	for _, t := range terms {
		df := 0
		for _, s := range segs {
			df += len(s.postings[t])
		}
		if df == 0 {
			continue
		}
		idf := math.Log(1 + (float64(n-df)+0.5)/(float64(df)+0.5))
		for si, s := range segs {
			ps := s.postings[t]
			if len(ps) == 0 {
				continue
			}
			if scores[si] == nil {
				scores[si] = make([]float64, s.Len())
			}
			for _, p := range ps {
				var w float64
				l := &s.lens[p.doc]
				for f := range numFields {
					if p.tf[f] == 0 {
						continue
					}
					norm := 1 - bField[f] + bField[f]*float64(l[f])/avg[f]
					w += weights[f] * float64(p.tf[f]) / norm
				}
				scores[si][p.doc] += idf * w * (k1 + 1) / (k1 + w)
			}
		}
	}
	h := &hitHeap{segs: segs, k: k}
	for si, sc := range scores {
		for d, v := range sc {
			if v > 0 {
				h.offer(Hit{Seg: si, Doc: d, Score: v})
			}
		}
	}
	out := h.hits
	sort.Slice(out, func(i, j int) bool { return h.better(out[i], out[j]) })
	return out
}

func uniq(ts []string) []string {
	seen := make(map[string]bool, len(ts))
	out := ts[:0]
	for _, t := range ts {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// hitHeap keeps the best k hits: a min-heap by rank, whose root is the
// worst kept.
type hitHeap struct {
	segs []*Segment
	k    int
	hits []Hit
}

func (h *hitHeap) better(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	if ua, ub := h.segs[a.Seg].upstream, h.segs[b.Seg].upstream; ua != ub {
		return ua < ub
	}
	return h.segs[a.Seg].names[a.Doc] < h.segs[b.Seg].names[b.Doc]
}

func (h *hitHeap) offer(x Hit) {
	if h.k <= 0 || len(h.hits) < h.k {
		if h.k <= 0 {
			h.hits = append(h.hits, x)
			return
		}
		heap.Push(h, x)
		return
	}
	if h.better(x, h.hits[0]) {
		h.hits[0] = x
		heap.Fix(h, 0)
	}
}

func (h *hitHeap) Len() int           { return len(h.hits) }
func (h *hitHeap) Less(i, j int) bool { return h.better(h.hits[j], h.hits[i]) }
func (h *hitHeap) Swap(i, j int)      { h.hits[i], h.hits[j] = h.hits[j], h.hits[i] }
func (h *hitHeap) Push(x any)         { h.hits = append(h.hits, x.(Hit)) }
func (h *hitHeap) Pop() any {
	x := h.hits[len(h.hits)-1]
	h.hits = h.hits[:len(h.hits)-1]
	return x
}
