package core

import (
	"context"
	"errors"
	"time"

	"github.com/mcpgw/mcpgw/internal/audit"
	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/policy"
	"github.com/mcpgw/mcpgw/internal/router/edge"
)

// The audit log (Generation.Audit): Handle opens an auditEntry for each
// routed request, guard fills in the decision, and dispatch writes the
// record once the response is known. Tool calls, prompt gets and resource
// reads are always recorded; other routed requests (subscribe, completion)
// only when refused. Every method is nil-safe: with no audit logger the
// router does no audit work.

// auditEntry is one request's record in the making.
type auditEntry struct {
	log *audit.Logger
	ctx context.Context
	rec audit.Record
	// refused: guard answered; nothing reached the upstream.
	refused bool
}

// auditBegin opens the record of a routed request (nil when audit is off).
func (c *Core) auditBegin(ctx context.Context, rte *Route, msg *jsonrpc.Message, v *Verdict) *auditEntry {
	if rte.Gen.Audit == nil {
		return nil
	}
	e := &auditEntry{log: rte.Gen.Audit, ctx: ctx, rec: audit.Record{
		Time:      time.Now(),
		Principal: v.principal,
		Route:     rte.Path,
		Method:    msg.Method,
		RequestID: edge.RequestID(ctx), // joins the process log's request_id
		TraceID:   traceID(ctx),        // telemetry.go
	}}
	if v.targeted {
		e.rec.Kind, e.rec.Name = v.kind, v.name
		if _, ok := rte.View.Curation().Curated(v.req.Name); ok && v.kind == string(mcp.KindTool) {
			e.rec.CuratedName = v.req.Name // both names (curate.go)
		}
		e.rec.Upstream = v.upstream()
		e.rec.Credential = string(rte.View.CredentialKind(e.rec.Upstream))
	}
	e.rec.ForwardedHeaders = auth.FromContext(ctx).ForwardedNames() // names only (credentials/forward.go)
	if v.task {
		e.rec.Kind, e.rec.Name, e.rec.Upstream = string(mcp.KindTask), v.external, v.taskUpstream
		if v.taskUpstream != "" {
			e.rec.Credential = string(rte.View.CredentialKind(v.taskUpstream))
		}
	}
	if args := callArguments(msg.Method, &v.req); args != nil {
		e.rec.Arguments = args
	}
	return e
}

// auditStage opens the request's audit record and writes it with the
// answer (fills r.audit; the route has it only with audit on).
func auditStage(ctx context.Context, r *Request, next Next) (resp *jsonrpc.Message) {
	r.audit = r.core.auditBegin(ctx, r.Route, r.Msg, r.Verdict)
	defer func() { r.audit.end(resp) }()
	return next(ctx, r)
}

// allowed records the policy's decision to let the request go ahead.
func (e *auditEntry) allowed(d policy.Decision) {
	if e == nil {
		return
	}
	e.rec.Decision, e.rec.Rule, e.rec.Pattern, e.rec.Reason = audit.Allow, audit.Rule(d), d.Pattern, d.Reason
}

// refuse records that guard refused the request: rule and reason say why.
func (e *auditEntry) refuse(outcome audit.Outcome, rule, pattern, reason string) {
	if e == nil {
		return
	}
	e.refused = true
	e.rec.Decision, e.rec.Outcome, e.rec.Rule, e.rec.Pattern, e.rec.Reason = audit.Deny, outcome, rule, pattern, reason
}

// end writes the record with the request's response.
func (e *auditEntry) end(resp *jsonrpc.Message) {
	if e == nil || (!e.refused && !mcp.Method(e.rec.Method).Audited) {
		return
	}
	e.rec.Duration = time.Since(e.rec.Time)
	outcome := e.rec.Outcome
	e.rec.SetResponse(resp, errors.Is(e.ctx.Err(), context.Canceled))
	if e.refused {
		e.rec.Outcome = outcome
		e.rec.Credential = "" // nothing reached the upstream
	}
	if e.rec.Decision == "" {
		e.rec.Decision = audit.Allow // no access policy
	}
	e.log.Log(&e.rec)
}

// auditChallenge records a request refused with an insufficient_scope
// challenge before dispatch (ScopeChallenge).
func (c *Core) auditChallenge(ctx context.Context, rte *Route, msg *jsonrpc.Message, v *Verdict) {
	d := v.decision
	e := c.auditBegin(ctx, rte, msg, v)
	e.refuse(audit.Denied, audit.Rule(d), d.Pattern, d.Reason)
	e.end(nil)
}
