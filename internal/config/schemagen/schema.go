package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
)

// draft is the JSON Schema dialect written: draft-07 is the newest one that
// yaml-language-server (and so VS Code's YAML extension) and IntelliJ
// fully support.
const draft = "http://json-schema.org/draft-07/schema#"

// schemaID is where the committed schema is published.
const schemaID = "https://raw.githubusercontent.com/mcpgw/mcpgw/main/docs/config.schema.json"

// valuesConfigDef is the definition name of the config's root schema inside
// values.schema.json, whose properties.config refers to it.
const valuesConfigDef = "mcpgwConfig"

// schema is one JSON Schema (draft-07) node. Field order is output order.
type schema struct {
	Schema        string    `json:"$schema,omitempty"`
	ID            string    `json:"$id,omitempty"`
	Ref           string    `json:"$ref,omitempty"`
	Title         string    `json:"title,omitempty"`
	Description   string    `json:"description,omitempty"`
	Type          typeList  `json:"type,omitempty"`
	Enum          []any     `json:"enum,omitempty"`
	Pattern       string    `json:"pattern,omitempty"`
	Minimum       *int64    `json:"minimum,omitempty"`
	Items         *schema   `json:"items,omitempty"`
	Properties    *members  `json:"properties,omitempty"`
	PropertyNames *schema   `json:"propertyNames,omitempty"`
	Required      []string  `json:"required,omitempty"`
	OneOf         []*schema `json:"oneOf,omitempty"`
	AnyOf         []*schema `json:"anyOf,omitempty"`
	// AdditionalProperties is false (unknown keys are errors) or a schema
	// (a map's values).
	AdditionalProperties any      `json:"additionalProperties,omitempty"`
	Definitions          *members `json:"definitions,omitempty"`
}

// typeList is "type": one name, or a list.
type typeList []string

func (t typeList) MarshalJSON() ([]byte, error) {
	if len(t) == 1 {
		return json.Marshal(t[0])
	}
	return json.Marshal([]string(t))
}

// members is a JSON object that keeps its insertion order (declaration
// order of the Go fields), so that editors list keys as the docs do.
type members struct {
	keys []string
	vals map[string]json.Marshaler
}

func (m *members) set(k string, v json.Marshaler) {
	if m.vals == nil {
		m.vals = map[string]json.Marshaler{}
	}
	if _, ok := m.vals[k]; !ok {
		m.keys = append(m.keys, k)
	}
	m.vals[k] = v
}

func (m *members) get(k string) json.Marshaler { return m.vals[k] }

func (m *members) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range m.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		vb, err := m.vals[k].MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads an object's members in order, keeping each value raw.
func (m *members) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errors.New("want a JSON object")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		m.set(t.(string), raw)
	}
	_, err := dec.Token()
	return err
}

// MarshalJSON lets a *schema be a members value.
func (s *schema) MarshalJSON() ([]byte, error) {
	type plain schema // without this method
	return marshal((*plain)(s))
}

// marshal is json.Marshal leaving <, > and & readable.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// scalarList matches an indented JSON array of strings, numbers, booleans
// and nulls, which encode puts on one line.
var scalarList = regexp.MustCompile(`\[\n(?:\s*(?:"(?:[^"\\\n]|\\.)*"|[-+0-9.eE]+|true|false|null),?\n)+\s*\]`)

// encode writes v as indented JSON with a final newline, short lists of
// values on one line.
func encode(v any) ([]byte, error) {
	compact, err := marshal(v)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, compact, "", "  "); err != nil {
		return nil, err
	}
	out := scalarList.ReplaceAllFunc(b.Bytes(), func(m []byte) []byte {
		var items []any
		if json.Unmarshal(m, &items) != nil {
			return m
		}
		one, err := marshal(items)
		if err != nil {
			return m
		}
		return bytes.ReplaceAll(one, []byte(`","`), []byte(`", "`))
	})
	return append(out, '\n'), nil
}

// intoValuesSchema returns the chart's values.schema.json with its
// "definitions" replaced by the config schema's, plus the config's root as
// valuesConfigDef. Everything else in the file is the chart's own and is
// kept in order.
func intoValuesSchema(values []byte, cfg *schema) ([]byte, error) {
	var top members
	if err := json.Unmarshal(values, &top); err != nil {
		return nil, err
	}
	props, ok := top.get("properties").(json.RawMessage)
	if !ok {
		return nil, errors.New("has no properties")
	}
	var p struct {
		Config struct {
			Ref string `json:"$ref"`
		} `json:"config"`
	}
	if err := json.Unmarshal(props, &p); err != nil {
		return nil, err
	}
	if want := "#/definitions/" + valuesConfigDef; p.Config.Ref != want {
		return nil, fmt.Errorf(`properties.config must be {"$ref": %q}, the config schema this program writes into definitions`, want)
	}
	root := *cfg
	root.Schema, root.ID, root.Definitions = "", "", nil
	defs := &members{}
	defs.set(valuesConfigDef, &root)
	for _, k := range cfg.Definitions.keys {
		defs.set(k, cfg.Definitions.get(k))
	}
	top.set("definitions", defs)
	return encode(&top)
}
