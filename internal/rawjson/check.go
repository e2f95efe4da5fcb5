package rawjson

import (
	"bytes"
	"hash/maphash"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// One reading of a document: decoders disagree about a JSON object that
// names a member twice (most keep the last, rawjson.Get and some keep the
// first) or that spells a member in another case (encoding/json matches
// struct fields case-insensitively, others do not). A gateway that judges
// one reading and forwards the bytes to an upstream that takes another
// has judged the wrong request. Check refuses both in one pass over the
// text, which it also validates as json.Valid does.

// DefaultMaxDepth is the nesting Check accepts when CheckOptions.MaxDepth
// is zero: far beyond what protocol messages use, far below what would
// make a recursive reader costly.
const DefaultMaxDepth = 512

// Members is an immutable tree of the member names a reader interprets in
// one object, and, for some of them, the names it interprets inside their
// values. Check refuses a member whose name is a case variant of one of
// them (strings.EqualFold, as encoding/json matches field names, but not
// equal): a case-insensitive decoder would read it as the member.
type Members struct {
	names []string
	bytes [][]byte // names, for comparisons that allocate nothing
	ascii []bool
	inner []*Members
}

// NewMembers returns the tree whose object interprets spec's keys; each
// key's value is what is interpreted inside that member (nil: nothing).
func NewMembers(spec map[string]*Members) *Members {
	m := &Members{}
	for n := range spec {
		m.names = append(m.names, n)
	}
	slices.Sort(m.names)
	for _, n := range m.names {
		m.bytes = append(m.bytes, []byte(n))
		m.ascii = append(m.ascii, isASCII([]byte(n)))
		m.inner = append(m.inner, spec[n])
	}
	return m
}

// Names returns the interpreted member names of m's object, sorted.
func (m *Members) Names() []string {
	if m == nil {
		return nil
	}
	return slices.Clone(m.names)
}

// Inner returns what is interpreted inside member name (nil: nothing).
func (m *Members) Inner(name string) *Members {
	if m == nil {
		return nil
	}
	if i, ok := slices.BinarySearch(m.names, name); ok {
		return m.inner[i]
	}
	return nil
}

// match finds key among m's names: the index of the name it equals, or of
// the name it is a case variant of (variant set); -1 when neither.
func (m *Members) match(key []byte, keyASCII bool) (i int, variant bool) {
	for i, n := range m.bytes {
		if bytes.Equal(key, n) {
			return i, false
		}
	}
	for i, n := range m.bytes {
		// ASCII folds only to ASCII of the same length; the Kelvin sign
		// and the long s fold to k and s in 3 and 2 bytes.
		if keyASCII && m.ascii[i] && len(n) != len(key) {
			continue
		}
		if bytes.EqualFold(key, n) {
			return i, true
		}
	}
	return -1, false
}

// CheckOptions configure Check.
type CheckOptions struct {
	// MaxDepth bounds the nesting of arrays and objects (0: DefaultMaxDepth).
	MaxDepth int
	// Members are the member names interpreted in the root object.
	Members *Members
	// Root, when set, is called with each member of the root object, in
	// order, once its value is checked: its decoded name (valid only
	// during the call) and its raw value. A later member may still fail
	// the check.
	Root func(name, value []byte)
	// Record, when set, is filled with the members of the object that is
	// the value of the root member it names (MemberRecord).
	Record *MemberRecord
}

// A MemberRecord, given to Check, records the members of one root
// member's object value (Of: "result", say) as Check passes them, so that
// a reader of that object needs no scan of its own. A later member may
// still fail the check.
type MemberRecord struct {
	Of string
	// Count is how many members there were; only the first len(Spans)
	// are recorded.
	Count int
	// Escaped tells whether a recorded member's name has an escape (its
	// text is then not its name).
	Escaped bool
	Spans   [8]MemberSpan
}

// MemberSpan is a recorded member: the offsets in the text of its name as
// written (its opening quote) and of its value.
type MemberSpan struct{ Name, Start, End int32 }

// Reason says why Check refused a text.
type Reason int

// The reasons Check refuses a text.
const (
	// Syntax: the text is not valid JSON.
	Syntax Reason = iota + 1
	// Duplicate: an object names a member twice (compared decoded, so
	// "n\u0061me" is "name").
	Duplicate
	// CaseVariant: an object has a case variant of an interpreted member.
	CaseVariant
	// TooDeep: arrays and objects nest deeper than the limit.
	TooDeep
)

// Step is one step of a path into a JSON value: a member name, or an array
// index when Index >= 0.
type Step struct {
	Name  string
	Index int
}

// CheckError says why Check refused a text and where.
type CheckError struct {
	Reason Reason
	// Path leads from the root to the object or array holding the problem.
	Path []Step
	// Name is the member at fault (Duplicate, CaseVariant), decoded.
	Name string
	// Want is the interpreted member Name is a case variant of.
	Want string
	// Offset is where in the text the problem is.
	Offset int
	// Detail says what is wrong with the syntax; MaxDepth is the limit
	// that was exceeded.
	Detail   string
	MaxDepth int
}

// Where is e's path as written in messages: "params.arguments",
// `_meta["io.modelcontextprotocol/logLevel"]`, "items[3]"; "" for the root.
// A path longer than 8 steps is cut short with "…".
func (e *CheckError) Where() string { return FormatPath(e.Path, 8) }

// FormatPath writes a path as Where does, cut after max steps (0: never).
func FormatPath(path []Step, max int) string {
	var b strings.Builder
	for i, s := range path {
		if max > 0 && i == max {
			b.WriteString("…")
			break
		}
		switch {
		case s.Index >= 0:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.Index))
			b.WriteByte(']')
		case plainName(s.Name):
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.Name)
		default:
			b.WriteByte('[')
			b.WriteString(QuoteName(s.Name))
			b.WriteByte(']')
		}
	}
	return b.String()
}

// QuoteName quotes a member name for a message: ASCII only (so that a
// Kelvin sign does not pass for a K), at most 64 bytes of it.
func QuoteName(s string) string {
	const max = 64
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.QuoteToASCII(s[:cut]) + "…"
	}
	return strconv.QuoteToASCII(s)
}

func plainName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '$' || c == '-') {
			return false
		}
	}
	return true
}

func (e *CheckError) Error() string {
	in := ""
	if w := e.Where(); w != "" {
		in = " in " + w
	}
	switch e.Reason {
	case Duplicate:
		return "rawjson: duplicate member " + QuoteName(e.Name) + in
	case CaseVariant:
		return "rawjson: member " + QuoteName(e.Name) + in + " is a case variant of " + QuoteName(e.Want)
	case TooDeep:
		return "rawjson: nested deeper than " + strconv.Itoa(e.MaxDepth) + " levels" + in
	}
	return "rawjson: invalid JSON: " + e.Detail + " at offset " + strconv.Itoa(e.Offset)
}

// Check validates data as one JSON value (exactly what json.Valid accepts,
// within the depth limit) and refuses, at any depth, an object that names
// a member twice, and a case variant of an interpreted member (opts.Members)
// where it is interpreted. Its errors are *CheckError. It runs in one pass,
// in time linear in len(data), and allocates nothing for a document
// without escaped member names or objects of more than 8 members.
func Check(data []byte, opts CheckOptions) error {
	noteRead(data)
	if len(data) > math.MaxInt32 {
		return &CheckError{Reason: Syntax, Detail: "text longer than 2 GiB"}
	}
	c := checker{data: data, max: opts.MaxDepth, root: opts.Root, rec: opts.Record}
	if c.max <= 0 {
		c.max = DefaultMaxDepth
	}
	end, err := c.value(skipSpace(data, 0), 0, opts.Members)
	if err == nil {
		if i := skipSpace(data, end); i != len(data) {
			err = c.syntax(i, "unexpected data after the value")
		}
	}
	if err != nil {
		slices.Reverse(err.Path) // gathered on the way out
		return err
	}
	return nil
}

// checker is the state of one Check. Each object's first members are kept
// in its own frame; objects with more use a hash table per depth (only one
// object per depth is open at a time), stamped with the object's
// generation so that a new object needs no clearing.
type checker struct {
	data    []byte
	max     int
	root    func(name, value []byte)
	rec     *MemberRecord
	inRec   bool   // the root member being checked is the one rec names
	scratch []byte // decoded names of open objects that had escapes
	tables  []*keyTable
	gen     uint32
	seed    maphash.Seed
	seeded  bool
}

// smallObject members are compared pairwise; beyond, by hash.
const smallObject = 8

// keyRef is a decoded member name: data[lo:hi], or scratch[lo:hi].
type keyRef struct {
	lo, hi  int32
	scratch bool
}

func (c *checker) name(k keyRef) []byte {
	if k.scratch {
		return c.scratch[k.lo:k.hi]
	}
	return c.data[k.lo:k.hi]
}

func (c *checker) syntax(off int, detail string) *CheckError {
	return &CheckError{Reason: Syntax, Offset: off, Detail: detail}
}

func (c *checker) value(i, depth int, m *Members) (int, *CheckError) {
	d := c.data
	if i >= len(d) {
		return 0, c.syntax(i, "unexpected end of input, expecting a value")
	}
	switch b := d[i]; {
	case b == '{':
		return c.object(i, depth+1, m)
	case b == '[':
		return c.array(i, depth+1)
	case b == '"':
		end, _, err := c.str(i)
		return end, err
	case b == 't':
		return c.literal(i, "true")
	case b == 'f':
		return c.literal(i, "false")
	case b == 'n':
		return c.literal(i, "null")
	case b == '-' || '0' <= b && b <= '9':
		return c.number(i)
	default:
		return 0, c.syntax(i, "invalid character "+strconv.QuoteRune(rune(b))+" looking for the beginning of a value")
	}
}

func (c *checker) literal(i int, lit string) (int, *CheckError) {
	if !bytes.HasPrefix(c.data[i:], []byte(lit)) {
		return 0, c.syntax(i, "invalid literal, expecting "+lit)
	}
	return i + len(lit), nil
}

func (c *checker) number(i int) (int, *CheckError) {
	d := c.data
	j := i
	if d[j] == '-' {
		j++
	}
	digits := func() bool {
		k := j
		for j < len(d) && '0' <= d[j] && d[j] <= '9' {
			j++
		}
		return j > k
	}
	switch {
	case j < len(d) && d[j] == '0':
		j++
	case j < len(d) && '1' <= d[j] && d[j] <= '9':
		digits()
	default:
		return 0, c.syntax(j, "invalid number, expecting a digit")
	}
	if j < len(d) && d[j] == '.' {
		j++
		if !digits() {
			return 0, c.syntax(j, "invalid number, expecting a digit after the decimal point")
		}
	}
	if j < len(d) && (d[j] == 'e' || d[j] == 'E') {
		j++
		if j < len(d) && (d[j] == '+' || d[j] == '-') {
			j++
		}
		if !digits() {
			return 0, c.syntax(j, "invalid number, expecting a digit in the exponent")
		}
	}
	return j, nil
}

// Flags str reports about a string.
const (
	strEscaped = 1 << iota // has a backslash escape
	strHigh                // has a byte >= 0x80
)

// plainByte marks the bytes a string carries as they are: not a quote, a
// backslash or a control character.
var plainByte = func() (t [256]bool) {
	for i := range t {
		t[i] = i >= 0x20 && i != '"' && i != '\\'
	}
	return t
}()

// str checks the string at d[i] == '"' and returns the index past it.
func (c *checker) str(i int) (end int, flags int, err *CheckError) {
	d := c.data
	var high byte
	j := i + 1
	for {
		var nonASCII bool
		if j, nonASCII = plainRun(d, j); nonASCII {
			high |= 0x80
		}
		for j < len(d) && plainByte[d[j]] {
			high |= d[j]
			j++
		}
		if j >= len(d) {
			return 0, 0, c.syntax(i, "unterminated string")
		}
		switch d[j] {
		case '"':
			if high >= 0x80 {
				flags |= strHigh
			}
			return j + 1, flags, nil
		case '\\':
			flags |= strEscaped
			if j+1 >= len(d) {
				return 0, 0, c.syntax(i, "unterminated string")
			}
			switch d[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(d) {
					return 0, 0, c.syntax(i, "unterminated string")
				}
				for _, h := range d[j+2 : j+6] {
					if !isHex(h) {
						return 0, 0, c.syntax(j, `invalid \u escape in a string`)
					}
				}
				j += 6
			default:
				return 0, 0, c.syntax(j, "invalid escape "+strconv.Quote(string(d[j:j+2]))+" in a string")
			}
		default:
			return 0, 0, c.syntax(j, "control character in a string")
		}
	}
}

// record adds a member of the recorded object to rec.
func (c *checker) record(name, flags, start, end int) {
	r := c.rec
	if r.Count < len(r.Spans) {
		r.Spans[r.Count] = MemberSpan{Name: int32(name), Start: int32(start), End: int32(end)}
		r.Escaped = r.Escaped || flags&strEscaped != 0
	}
	r.Count++
}

func (c *checker) array(i, depth int) (int, *CheckError) {
	if depth > c.max {
		return 0, &CheckError{Reason: TooDeep, Offset: i, MaxDepth: c.max}
	}
	d := c.data
	j := skipSpace(d, i+1)
	if j < len(d) && d[j] == ']' {
		return j + 1, nil
	}
	for n := 0; ; n++ {
		end, err := c.value(j, depth, nil)
		if err != nil {
			err.Path = append(err.Path, Step{Index: n})
			return 0, err
		}
		j = skipSpace(d, end)
		if j >= len(d) {
			return 0, c.syntax(j, "unterminated array")
		}
		switch d[j] {
		case ',':
			j = skipSpace(d, j+1)
		case ']':
			return j + 1, nil
		default:
			return 0, c.syntax(j, "expected ',' or ']' after an array element")
		}
	}
}

func (c *checker) object(i, depth int, m *Members) (int, *CheckError) {
	if depth > c.max {
		return 0, &CheckError{Reason: TooDeep, Offset: i, MaxDepth: c.max}
	}
	d := c.data
	mark := len(c.scratch)
	defer func() { c.scratch = c.scratch[:mark] }()
	var small [smallObject]keyRef
	var tab *keyTable
	n := 0
	j := skipSpace(d, i+1)
	if j < len(d) && d[j] == '}' {
		return j + 1, nil
	}
	for {
		if j >= len(d) || d[j] != '"' {
			return 0, c.syntax(j, "expected a string member name")
		}
		kStart := j
		kEnd, flags, err := c.str(j)
		if err != nil {
			return 0, err
		}
		key, ascii := c.key(j, kEnd, flags)
		name := c.name(key)
		switch {
		case n < smallObject:
			for _, k := range small[:n] {
				if bytes.Equal(c.name(k), name) {
					return 0, &CheckError{Reason: Duplicate, Name: string(name), Offset: j}
				}
			}
			small[n] = key
		default:
			if n == smallObject {
				tab = c.table(depth)
				for _, k := range small {
					tab.insert(c, k)
				}
			}
			if tab.insert(c, key) {
				return 0, &CheckError{Reason: Duplicate, Name: string(name), Offset: j}
			}
		}
		n++
		var inner *Members
		if m != nil {
			if x, variant := m.match(name, ascii); variant {
				return 0, &CheckError{Reason: CaseVariant, Name: string(name), Want: m.names[x], Offset: j}
			} else if x >= 0 {
				inner = m.inner[x]
			}
		}
		j = skipSpace(d, kEnd)
		if j >= len(d) || d[j] != ':' {
			return 0, c.syntax(j, "expected ':' after a member name")
		}
		v := skipSpace(d, j+1)
		if depth == 1 && c.rec != nil {
			c.inRec = string(name) == c.rec.Of
		}
		end, err := c.value(v, depth, inner)
		if err != nil {
			err.Path = append(err.Path, Step{Name: string(c.name(key)), Index: -1})
			return 0, err
		}
		if depth == 1 && c.root != nil {
			c.root(c.name(key), d[v:end])
		}
		if depth == 2 && c.inRec {
			c.record(kStart, flags, v, end)
		}
		j = skipSpace(d, end)
		if j >= len(d) {
			return 0, c.syntax(j, "unterminated object")
		}
		switch d[j] {
		case ',':
			j = skipSpace(d, j+1)
		case '}':
			return j + 1, nil
		default:
			return 0, c.syntax(j, "expected ',' or '}' after an object member")
		}
	}
}

// key returns the decoded name of the member name string d[i:end], and
// whether it is ASCII. Names without escapes that are valid UTF-8 are
// their own bytes; others are decoded into scratch as encoding/json
// decodes them.
func (c *checker) key(i, end, flags int) (keyRef, bool) {
	raw := c.data[i+1 : end-1]
	if flags&strEscaped == 0 && (flags&strHigh == 0 || utf8.Valid(raw)) {
		return keyRef{lo: int32(i + 1), hi: int32(end - 1)}, flags&strHigh == 0
	}
	lo := len(c.scratch)
	c.scratch = AppendUnquoted(c.scratch, raw)
	k := keyRef{lo: int32(lo), hi: int32(len(c.scratch)), scratch: true}
	return k, isASCII(c.name(k))
}

// table returns the hash table of depth, for a new object.
func (c *checker) table(depth int) *keyTable {
	for len(c.tables) <= depth {
		c.tables = append(c.tables, nil)
	}
	t := c.tables[depth]
	if t == nil {
		t = &keyTable{slots: make([]slot, minTable)}
		c.tables[depth] = t
	}
	if !c.seeded {
		// A seed of this check's own: member names chosen to collide
		// cannot make the table quadratic.
		c.seed, c.seeded = maphash.MakeSeed(), true
	}
	c.gen++
	t.gen, t.size, t.keys = c.gen, minTable, t.keys[:0]
	return t
}

// minTable is the first size of an object's hash table.
const minTable = 32

// keyTable is an open-addressing set of the member names of one object,
// in slots[:size]. A slot of another generation is empty: an object never
// removes names, so the probe sequence of each of its names holds only
// slots of its generation, and the next object (or a bigger table for
// this one) only needs a new generation, never a clearing.
type keyTable struct {
	slots []slot
	size  int
	gen   uint32
	keys  []tableKey // the object's names, in order
}

type slot struct {
	gen, hash, idx uint32 // idx: in keys
}

type tableKey struct {
	ref  keyRef
	hash uint32
}

// insert adds k and reports whether the object already had it.
func (t *keyTable) insert(c *checker, k keyRef) bool {
	name := c.name(k)
	h := uint32(maphash.Bytes(c.seed, name))
	if 4*(len(t.keys)+1) > 3*t.size {
		t.grow(c)
	}
	mask := uint32(t.size - 1)
	for p := h & mask; ; p = (p + 1) & mask {
		s := &t.slots[p]
		if s.gen != t.gen {
			*s = slot{gen: t.gen, hash: h, idx: uint32(len(t.keys))}
			t.keys = append(t.keys, tableKey{k, h})
			return false
		}
		if s.hash == h && bytes.Equal(c.name(t.keys[s.idx].ref), name) {
			return true
		}
	}
}

// grow doubles the table, within the slots it has when they suffice.
func (t *keyTable) grow(c *checker) {
	t.size *= 2
	if t.size > len(t.slots) {
		t.slots = make([]slot, t.size)
	}
	c.gen++
	t.gen = c.gen
	mask := uint32(t.size - 1)
	for i, k := range t.keys {
		p := k.hash & mask
		for t.slots[p].gen == t.gen {
			p = (p + 1) & mask
		}
		t.slots[p] = slot{gen: t.gen, hash: k.hash, idx: uint32(i)}
	}
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// AppendUnquoted appends the decoding of raw, the text of a valid JSON
// string between its quotes, exactly as encoding/json decodes it: invalid
// UTF-8 and unpaired surrogate escapes become U+FFFD.
func AppendUnquoted(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		b := raw[i]
		switch {
		case b == '\\' && i+1 < len(raw):
			switch e := raw[i+1]; e {
			case 'b':
				dst, i = append(dst, '\b'), i+2
			case 'f':
				dst, i = append(dst, '\f'), i+2
			case 'n':
				dst, i = append(dst, '\n'), i+2
			case 'r':
				dst, i = append(dst, '\r'), i+2
			case 't':
				dst, i = append(dst, '\t'), i+2
			case 'u':
				r := hex4(raw[i+2:])
				i += 6
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						r2 = hex4(raw[i+2:])
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						dst, i = utf8.AppendRune(dst, dec), i+6
						break
					}
					r = utf8.RuneError
				}
				dst = utf8.AppendRune(dst, r)
			default: // '"', '\\', '/'
				dst, i = append(dst, e), i+2
			}
		case b < utf8.RuneSelf:
			dst, i = append(dst, b), i+1
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, raw[i:i+size]...)
			}
			i += size
		}
	}
	return dst
}

// hex4 reads 4 hex digits (checked by the caller), or -1 when there are not 4.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
