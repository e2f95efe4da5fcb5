package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Definition pinning. A lock file records the approved definition of each
// tool of each upstream as a hash; a tool whose hash is not in the lock is
// new, one whose hash differs is changed. Hashes are over what a model
// reads and what shapes its calls, so that a "rug pull" (an upstream
// quietly rewriting a tool's description or schema after approval) is
// caught:
//
//	sha256 over the canonical JSON of the object holding the tool's name,
//	title, description, inputSchema, outputSchema, annotations, execution
//	and icons, and of its _meta only the MCP Apps UI resource
//	(_meta.ui.resourceUri, and the older flat _meta["ui/resourceUri"])
//	(each of those present and not null)
//
// What a host renders or runs for a tool (its UI resource, its icons, how
// it executes) is part of what was approved. Members are covered only when
// present, so a tool without execution, icons or a UI resource hashes as
// it did before they were covered, and older lock files stay valid for it;
// a tool with one of them that an older lock approved is reported as
// changed, with an error saying to approve it again (Lock.Check).
//
// Canonical JSON here: objects with keys sorted (by their UTF-8 bytes) and
// no duplicate keys at any depth (a tool with one is refused: clients that
// keep the first and the last duplicate would read different tools),
// arrays in order, no whitespace, strings re-encoded by encoding/json
// without HTML escaping, numbers in shortest form (1.0 and 1e0 are both 1).
// So the hash does not depend on key order, spacing or escapes.
//
// Names in the lock file are the upstream's own tool names (before any
// route prefix), grouped by upstream, so one lock serves every route:
//
//	{
//	  "version": 1,
//	  "upstreams": {
//	    "github": {
//	      "tools": {
//	        "create_issue": "sha256:4f5e…"
//	      }
//	    }
//	  }
//	}

// LockVersion is the lock file format version.
const LockVersion = 1

// PinStatus is the result of checking a tool against a lock.
type PinStatus int

// Pin statuses.
const (
	// PinOK: the tool's definition is the approved one.
	PinOK PinStatus = iota
	// PinNew: the lock has no entry for the tool.
	PinNew
	// PinChanged: the lock has a different definition for the tool.
	PinChanged
	// PinInvalid: the tool's JSON cannot be hashed (no name, duplicate keys).
	PinInvalid
)

func (s PinStatus) String() string {
	switch s {
	case PinOK:
		return "ok"
	case PinNew:
		return "new"
	case PinChanged:
		return "changed"
	}
	return "invalid"
}

// Lock is a lock file: approved tool hashes by upstream and tool name.
type Lock struct {
	Version   int                      `json:"version"`
	Upstreams map[string]*LockUpstream `json:"upstreams"`
}

// LockUpstream holds one upstream's approved tools.
type LockUpstream struct {
	// Tools maps the upstream's tool name to "sha256:<hex>".
	Tools map[string]string `json:"tools"`
}

// NewLock returns an empty lock.
func NewLock() *Lock { return &Lock{Version: LockVersion, Upstreams: map[string]*LockUpstream{}} }

// ParseLock reads a lock file strictly: unknown fields, another version or
// a malformed hash are errors.
func ParseLock(data []byte) (*Lock, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var l Lock
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("lock file: data after the JSON object")
	}
	if l.Version != LockVersion {
		return nil, fmt.Errorf("lock file: version %d is not supported (want %d); write it again with mcpgw pin", l.Version, LockVersion)
	}
	if l.Upstreams == nil {
		l.Upstreams = map[string]*LockUpstream{}
	}
	for up, u := range l.Upstreams {
		if u == nil {
			return nil, fmt.Errorf("lock file: upstream %q is null", up)
		}
		for name, h := range u.Tools {
			if !validHash(h) {
				return nil, fmt.Errorf("lock file: upstream %q tool %q: %q is not sha256:<64 hex digits>", up, name, h)
			}
		}
	}
	return &l, nil
}

func validHash(h string) bool {
	hexs, ok := strings.CutPrefix(h, "sha256:")
	if !ok || len(hexs) != 64 {
		return false
	}
	_, err := hex.DecodeString(hexs)
	return err == nil && strings.ToLower(hexs) == hexs
}

// LoadLock reads a lock file.
func LoadLock(path string) (*Lock, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	l, err := ParseLock(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// Marshal writes the lock as indented JSON with sorted keys and a final
// newline, so that it diffs well in review.
func (l *Lock) Marshal() []byte {
	b, _ := json.MarshalIndent(l, "", "  ") // maps of strings cannot fail
	return append(b, '\n')
}

// AddTools records the definitions of an upstream's tools: tools is a JSON
// array of tools, or a tools/list result (its "tools" member). Existing
// entries for the same names are replaced.
func (l *Lock) AddTools(upstream string, tools json.RawMessage) error {
	if firstByte(tools) == '{' {
		arr, ok := rawjson.Get(tools, "tools")
		if !ok {
			return errors.New(`lock: the object has no "tools" member; give a tools/list result or an array of tools`)
		}
		tools = arr
	}
	items, err := rawjson.Elements(tools)
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	u := l.Upstreams[upstream]
	if u == nil {
		u = &LockUpstream{Tools: map[string]string{}}
		l.Upstreams[upstream] = u
	}
	for i, it := range items {
		name, h, err := ToolHash(it)
		if err != nil {
			return fmt.Errorf("lock: tool %d of %s: %w", i, upstream, err)
		}
		u.Tools[name] = h
	}
	return nil
}

// BuildLock makes a lock from tools (each value as for AddTools) by upstream.
func BuildLock(tools map[string]json.RawMessage) (*Lock, error) {
	l := NewLock()
	for _, up := range sortedKeys(tools) {
		if err := l.AddTools(up, tools[up]); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Check compares an upstream's raw tool definition with the lock.
func (l *Lock) Check(upstream string, tool []byte) (PinStatus, error) {
	st, _, err := l.check(upstream, tool)
	return st, err
}

// check is Check, also returning the tool's hash ("" for PinInvalid).
func (l *Lock) check(upstream string, tool []byte) (PinStatus, string, error) {
	obj, name, err := parseTool(tool)
	if err != nil {
		return PinInvalid, "", err
	}
	h := hashOf(obj, pinnedFields, true)
	u := l.Upstreams[upstream]
	if u == nil {
		return PinNew, h, nil
	}
	switch approved, ok := u.Tools[name]; {
	case !ok:
		return PinNew, h, nil
	case approved != h:
		if hashOf(obj, pinnedFields[:legacyPinnedFields], false) == approved {
			return PinChanged, h, errors.New("approved by a lock written before pinning covered execution, icons and _meta.ui.resourceUri; review the tool and approve it again with mcpgw pin")
		}
		return PinChanged, h, nil
	}
	return PinOK, h, nil
}

// pinnedFields are the members of a tool the hash covers (besides the UI
// resource in _meta). The first legacyPinnedFields are what it covered
// before execution and icons were added: a lock written then approved a
// tool by them alone.
var pinnedFields = []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations", "execution", "icons"}

const legacyPinnedFields = 6

// ToolHash returns a tool's name and the hash of its definition,
// "sha256:<hex>", from its raw JSON object.
func ToolHash(tool []byte) (name, hash string, err error) {
	obj, name, err := parseTool(tool)
	if err != nil {
		return "", "", err
	}
	return name, hashOf(obj, pinnedFields, true), nil
}

// parseTool decodes a tool for hashing: an object with a name.
func parseTool(tool []byte) (map[string]any, string, error) {
	v, err := parseCanonical(tool)
	if err != nil {
		return nil, "", err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, "", errors.New("a tool is a JSON object")
	}
	name, ok := obj["name"].(string)
	if !ok || name == "" {
		return nil, "", errors.New(`the tool has no "name" string`)
	}
	return obj, name, nil
}

// hashOf hashes the canonical JSON of the members fields of a tool (and,
// with ui, of its UI resource in _meta).
func hashOf(obj map[string]any, fields []string, ui bool) string {
	pinned := map[string]any{}
	for _, f := range fields {
		if x, ok := obj[f]; ok && x != nil {
			pinned[f] = x
		}
	}
	if m := uiMeta(obj); ui && m != nil {
		pinned["_meta"] = m
	}
	var buf bytes.Buffer
	writeCanonical(&buf, pinned)
	sum := sha256.Sum256(buf.Bytes())
	return "sha256:" + hex.EncodeToString(sum[:])
}

// uiMeta is the part of a tool's _meta that names its MCP Apps UI
// resource (_meta.ui.resourceUri, or the older flat "ui/resourceUri"), as
// an object of that shape; nil when it names none. The rest of _meta is
// not pinned: it may carry what changes without the tool changing.
func uiMeta(obj map[string]any) map[string]any {
	meta, _ := obj["_meta"].(map[string]any)
	if meta == nil {
		return nil
	}
	out := map[string]any{}
	if ui, _ := meta["ui"].(map[string]any); ui != nil {
		if r, ok := ui["resourceUri"]; ok && r != nil {
			out["ui"] = map[string]any{"resourceUri": r}
		}
	}
	if r, ok := meta["ui/resourceUri"]; ok && r != nil {
		out["ui/resourceUri"] = r
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Canonical returns the canonical form of a JSON value (see ToolHash).
func Canonical(data []byte) ([]byte, error) {
	v, err := parseCanonical(data)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	writeCanonical(&buf, v)
	return buf.Bytes(), nil
}

// parseCanonical decodes one JSON value, refusing duplicate keys.
func parseCanonical(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeStrict(dec, 0, false)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

func writeCanonical(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case map[string]any:
		keys := sortedKeys(v)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			writeCanonical(b, v[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, x)
		}
		b.WriteByte(']')
	case string:
		writeString(b, v)
	case json.Number:
		b.WriteString(canonicalNumber(v))
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case nil:
		b.WriteString("null")
	}
}

func writeString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a string always encodes
	b.Truncate(b.Len() - 1) // Encode's newline
}

// canonicalNumber writes a number in its shortest float64 form: integers
// below 1e21 in plain digits, others as strconv's 'g'. A number beyond
// float64 keeps its text.
func canonicalNumber(n json.Number) string {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(f, 0) {
		return string(n)
	}
	if f == 0 {
		return "0" // also -0
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// Pinner applies policy.pinning: a mode and the lock it checks against.
// A nil *Pinner (mode off) passes everything.
type Pinner struct {
	Mode string
	Lock *Lock
}

// NewPinner loads the lock file of policy.pinning. Mode off (or no section)
// gives nil. In enforce mode a missing lock file is an error (every tool
// would be hidden); in warn mode it is an empty lock.
func NewPinner(pc *config.Pinning) (*Pinner, error) {
	if pc == nil || pc.Mode == config.PinOff || pc.Mode == "" {
		return nil, nil
	}
	if pc.Mode != config.PinWarn && pc.Mode != config.PinEnforce {
		return nil, fmt.Errorf("policy.pinning.mode: %q is not off, warn or enforce", pc.Mode)
	}
	l, err := LoadLock(pc.LockFile)
	switch {
	case errors.Is(err, fs.ErrNotExist) && pc.Mode == config.PinWarn:
		l = NewLock()
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("policy.pinning.lock_file: %s does not exist, and enforce mode would hide every tool; create it with mcpgw pin, or use mode: warn first", pc.LockFile)
	case err != nil:
		return nil, fmt.Errorf("policy.pinning.lock_file: %w", err)
	}
	return &Pinner{Mode: pc.Mode, Lock: l}, nil
}

// PinResult is the outcome of Pinner.Check.
type PinResult struct {
	Status PinStatus
	// Allowed reports whether the tool may be listed and called: always in
	// warn mode, only when Status is PinOK in enforce mode.
	Allowed bool
	// Hash is the tool's definition hash ("" for PinInvalid): what a
	// verdict about this definition is remembered by.
	Hash string
	// Err explains PinInvalid (and a PinChanged that an older lock format
	// explains).
	Err error
}

// Check checks an upstream's raw tool (as the upstream sent it, before
// name prefixing). In warn mode log and count when Status is not PinOK.
func (pn *Pinner) Check(upstream string, tool []byte) PinResult {
	if pn == nil {
		return PinResult{Status: PinOK, Allowed: true}
	}
	st, h, err := pn.Lock.check(upstream, tool)
	return PinResult{Status: st, Allowed: st == PinOK || pn.Mode == config.PinWarn, Hash: h, Err: err}
}

// Tools returns the upstream's approved tool names, sorted.
func (l *Lock) Tools(upstream string) []string {
	u := l.Upstreams[upstream]
	if u == nil {
		return nil
	}
	names := sortedKeys(u.Tools)
	return slices.Clip(names)
}
