package core

import (
	"fmt"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/policy"
)

// An upstream that rewrites one tool on every list costs one remembered
// verdict, not one per version (issue 37.8), each version is logged once,
// and the memory is bounded however many tools there are.
func TestPinVerdictsBounded(t *testing.T) {
	obs, logs := observer.New(zapcore.WarnLevel)
	c := &Core{log: zap.New(obs)}
	pn := &policy.Pinner{Mode: config.PinWarn, Lock: policy.NewLock()}
	for i := range 5000 {
		def := []byte(fmt.Sprintf(`{"name":"t","description":"version %d"}`, i))
		if !c.pinned(pn, "up", "up__t", def) {
			t.Fatal("warn mode refused a tool")
		}
		c.pinned(pn, "up", "up__t", def) // the same definition again: not logged again
	}
	if n := c.pinWarned.len(); n != 1 {
		t.Errorf("%d verdicts remembered for 5000 versions of one tool, want 1", n)
	}
	if n := logs.Len(); n != 5000 {
		t.Errorf("%d warnings for 5000 versions, want one each", n)
	}
	// Back to an earlier version: its verdict is news again.
	c.pinned(pn, "up", "up__t", []byte(`{"name":"t","description":"version 0"}`))
	if n := logs.Len(); n != 5001 {
		t.Errorf("%d warnings, want 5001", n)
	}

	small := pinVerdicts{max: 3}
	for i := range 10 {
		small.fresh("up", fmt.Sprint("tool", i), pinVerdict{policy.PinNew, "h"})
	}
	if n := small.len(); n != 3 {
		t.Errorf("%d verdicts remembered, want the bound 3", n)
	}
}
