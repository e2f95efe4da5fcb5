package toolsearch

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestTokens(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"read_file", []string{"read", "file"}},
		{"getFileInfo", []string{"get", "file", "info", "getfileinfo"}},
		{"HTTPServer-status", []string{"http", "server", "httpserver", "status"}},
		{"list-the-Issues", []string{"list", "issue"}},
		{"Create a GitHub issue", []string{"create", "git", "hub", "github", "issue"}},
		{"repositories branches addresses indexes", []string{"repository", "branch", "address", "index"}},
		{"access status analysis", []string{"access", "status", "analysis"}},
		{"s3.put_object v2", []string{"s3", "put", "object", "v2"}},
		{"", nil},
		{"  the of a ", nil},
		{"naïve Größe", []string{"naïve", "größe"}},
	}
	for _, c := range cases {
		if got := Tokens(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Tokens(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestParseTool(t *testing.T) {
	d, ok := ParseTool([]byte(`{"name":"search_code","annotations":{"title":"Code search"},"description":"Search code.",
		"inputSchema":{"type":"object","properties":{"q":{"type":"string","description":"Query text"},"opts":{"type":"object","properties":{"perPage":{"type":"integer"}}}}},"x":1}`))
	if !ok || d.Name != "search_code" || d.Title != "Code search" || d.Description != "Search code." {
		t.Fatalf("ParseTool = %+v, %v", d, ok)
	}
	if got := Tokens(d.Params); !slices.Equal(got, []string{"opt", "per", "page", "perpage", "q", "query", "text"}) {
		t.Errorf("params tokens = %q", got)
	}
	if _, ok := ParseTool([]byte(`{"description":"no name"}`)); ok {
		t.Error("a tool without a name was indexed")
	}
}

var fsDocs = []Doc{
	{Name: "read_file", Description: "Read the complete contents of a file from the file system.", Params: "path The file path"},
	{Name: "write_file", Description: "Create a new file or overwrite an existing file with new content.", Params: "path content"},
	{Name: "list_directory", Description: "List the files and directories in a directory.", Params: "path"},
}

var githubDocs = []Doc{
	{Name: "create_issue", Description: "Create a new issue in a GitHub repository.", Params: "owner repo title body"},
	{Name: "list_issues", Description: "List issues in a GitHub repository.", Params: "owner repo state"},
	{Name: "get_file_contents", Description: "Get the contents of a file or directory from a GitHub repository.", Params: "owner repo path"},
}

func fixture() []*Segment {
	return []*Segment{NewSegment("fs", fsDocs), NewSegment("github", githubDocs)}
}

func names(segs []*Segment, hits []Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, segs[h.Seg].Upstream()+"/"+segs[h.Seg].Name(h.Doc))
	}
	return out
}

func TestSearchRanks(t *testing.T) {
	segs := fixture()
	cases := []struct {
		query, top string
	}{
		{"read a file", "fs/read_file"},
		{"create a github issue", "github/create_issue"},
		{"show the issues of a repo", "github/list_issues"},
		{"what is in this folder directory", "fs/list_directory"},
		{"overwrite file content", "fs/write_file"},
	}
	for _, c := range cases {
		hits := Search(segs, c.query, 3)
		if got := names(segs, hits); len(got) == 0 || got[0] != c.top {
			t.Errorf("Search(%q) = %v, want %s first", c.query, got, c.top)
		}
		for i := 1; i < len(hits); i++ {
			if hits[i].Score > hits[i-1].Score {
				t.Errorf("Search(%q): not ordered by score: %v", c.query, hits)
			}
		}
	}
	if hits := Search(segs, "zebra the of", 5); len(hits) != 0 {
		t.Errorf("no term matches, yet hits %v", names(segs, hits))
	}
}

// Equal scores are ordered by upstream, then name; k bounds the answer and
// keeps the same best ones as an unbounded search.
func TestSearchDeterministic(t *testing.T) {
	var docs []Doc
	for i := range 50 {
		docs = append(docs, Doc{Name: fmt.Sprintf("tool_%02d", 49-i), Description: "same words here"})
	}
	segs := []*Segment{NewSegment("b", docs), NewSegment("a", docs)}
	all := Search(segs, "same words", 0)
	if len(all) != 100 {
		t.Fatalf("%d hits, want 100", len(all))
	}
	got := names(segs, all)
	want := slices.Clone(got)
	sort.Strings(want) // a/tool_00 … b/tool_49: all scores tie
	if !slices.Equal(got, want) {
		t.Errorf("ties not broken by upstream then name: %v", got[:5])
	}
	if top := names(segs, Search(segs, "same words", 7)); !slices.Equal(top, want[:7]) {
		t.Errorf("top 7 = %v, want %v", top, want[:7])
	}
}

// Segments searched together score as one index over all their
// documents, however the documents are split into segments.
func TestSegmentsScoreAsOne(t *testing.T) {
	segs := fixture()
	split := []*Segment{NewSegment("fs", fsDocs[:1]), NewSegment("fs", fsDocs[1:]), NewSegment("github", githubDocs)}
	for _, q := range []string{"read a file", "github repository contents"} {
		a, b := map[string]float64{}, map[string]float64{}
		for _, h := range Search(segs, q, 0) {
			a[segs[h.Seg].Upstream()+"/"+segs[h.Seg].Name(h.Doc)] = h.Score
		}
		for _, h := range Search(split, q, 0) {
			b[split[h.Seg].Upstream()+"/"+split[h.Seg].Name(h.Doc)] = h.Score
		}
		if len(a) == 0 || len(a) != len(b) {
			t.Fatalf("%q: %v vs %v", q, a, b)
		}
		for k, v := range a {
			if math.Abs(b[k]-v) > 1e-9 {
				t.Errorf("%q: %s scored %v in one layout, %v in another", q, k, v, b[k])
			}
		}
	}
}

// synthetic makes n tool documents over ups upstreams from a vocabulary,
// seeded, so that every run indexes the same catalog.
func synthetic(n, ups int) [][]Doc {
	rng := rand.New(rand.NewPCG(1, 2))
	verbs := strings.Fields("get list create update delete search read write move copy send fetch query run start stop export import sync archive")
	nouns := strings.Fields("file issue repository branch commit message channel user ticket table row record document page comment label project task event invoice payment order customer deployment pod bucket object secret key")
	words := strings.Fields("the a of to in for with from by on and or new existing all given specified returns details information content data item items list optional required id name path value filter limit page size sort order format output")
	out := make([][]Doc, ups)
	for i := range n {
		v, o := verbs[rng.IntN(len(verbs))], nouns[rng.IntN(len(nouns))]
		var desc strings.Builder
		fmt.Fprintf(&desc, "%s %s", strings.ToUpper(v[:1])+v[1:], o)
		for range 12 + rng.IntN(20) {
			desc.WriteString(" " + words[rng.IntN(len(words))])
		}
		params := fmt.Sprintf("%s_id The %s id limit Maximum results cursor Pagination cursor", o, o)
		u := i % ups
		out[u] = append(out[u], Doc{Name: fmt.Sprintf("%s_%s_%d", v, o, i), Description: desc.String(), Params: params})
	}
	return out
}

// BenchmarkBuild indexes 10,000 tools over 20 upstreams (what a catalog
// change of all of them costs; one upstream's change costs its share).
// index-bytes is the heap the segments hold.
func BenchmarkBuild10k(b *testing.B) {
	docs := synthetic(10_000, 20)
	var segs []*Segment
	b.ReportAllocs()
	for b.Loop() {
		segs = segs[:0]
		for u, d := range docs {
			segs = append(segs, NewSegment(fmt.Sprintf("up%02d", u), d))
		}
	}
	b.StopTimer()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	kept := make([]*Segment, 0, len(docs))
	for u, d := range docs {
		kept = append(kept, NewSegment(fmt.Sprintf("up%02d", u), d))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc), "index-bytes")
	runtime.KeepAlive(kept)
	runtime.KeepAlive(docs) // else the GC frees the input while the index is measured
}

// BenchmarkQuery10k searches 10,000 tools for the top 10 with queries of
// 2–5 words, reporting the latency percentiles of single queries.
func BenchmarkQuery10k(b *testing.B) {
	docs := synthetic(10_000, 20)
	var segs []*Segment
	for u, d := range docs {
		segs = append(segs, NewSegment(fmt.Sprintf("up%02d", u), d))
	}
	queries := []string{"read a file", "create a github issue", "list repository branches", "send a message to a channel",
		"delete the customer record", "search tickets by label", "export table rows", "start deployment pod", "get invoice payment details", "move object to bucket"}
	var lat []time.Duration
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		start := time.Now()
		Search(segs, queries[i%len(queries)], 10)
		lat = append(lat, time.Since(start))
		i++
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
