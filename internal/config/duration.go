package config

import (
	"fmt"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/mcpgw/mcpgw/internal/config/strictyaml"
)

// UnmarshalYAML accepts a Go duration string such as "30s" or "1m30s".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("want a duration, got %s; write one value such as 30s or 1m30s", strictyaml.Describe(n))
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("%q is not a duration; write a number with a unit (ms, s, m, h), e.g. 30s or 1m30s", n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration back in the form UnmarshalYAML reads.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// String formats the duration like time.Duration ("1m30s").
func (d Duration) String() string { return time.Duration(d).String() }
