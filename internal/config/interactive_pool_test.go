package config_test

import "testing"

// upstreams.NAME.interactive_pool defaults to 4 when not written, and 0
// written is kept (it turns the pool off); the range is checked by
// testdata/interactive-pool.bad.yaml.
func TestInteractivePoolDefault(t *testing.T) {
	c := mustParse(t, `
upstreams:
  a: {command: [x]}
  b: {command: [x], interactive_pool: 0}
`, nil)
	if got := c.Upstreams["a"].InteractivePool; got != 4 {
		t.Errorf("upstreams.a.interactive_pool = %d, want the default 4", got)
	}
	if got := c.Upstreams["b"].InteractivePool; got != 0 {
		t.Errorf("upstreams.b.interactive_pool = %d, want 0 as written", got)
	}
}
