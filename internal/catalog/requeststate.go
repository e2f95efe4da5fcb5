package catalog

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Request states (2026-07-28 input_required). A stateless upstream's own
// requestState is a bearer of the call it continues: passed through as
// it is, one that leaked would work for any caller of the route. The
// gateway hands out instead a seal (the task ids' keys, under a label of
// their own) of the upstream, its state and the caller as task ids bind
// them (taskClaims); a retry's state is opened and checked before the
// upstream's own goes back to it. Anything else in requestState — forged,
// another caller's, another upstream's — is refused like an unknown state.
// The gateway's own bridge states (router core) never come here.

const (
	stateTokenPrefix = "mcpgw-rs1."
	stateTokenAD     = "mcpgw request state v1"
	formState        = "state"
)

// sealState seals the upstream's state c.ID for the caller in c (a random
// nonce: states are not compared).
func (t *tasks) sealState(c taskClaims) string {
	plain, _ := json.Marshal(c)
	a := t.keys.Load().aeads[0]
	nonce := make([]byte, a.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return stateTokenPrefix + base64.RawURLEncoding.EncodeToString(a.Seal(nonce, nonce, plain, []byte(stateTokenAD)))
}

// openState returns the claims of a state token sealed with any ring key.
func (t *tasks) openState(token string) (taskClaims, bool) {
	var c taskClaims
	plain, ok := t.openSealed(token, stateTokenPrefix, stateTokenAD)
	if !ok || json.Unmarshal(plain, &c) != nil || c.Upstream == "" || c.Form != formState {
		return taskClaims{}, false
	}
	return c, true
}

// openRequestState puts back the upstream's own requestState in a
// stateless caller's retry to upstream, or refuses a state that is not
// one the gateway handed this caller for that upstream.
func (v *View) openRequestState(ctx context.Context, upstream string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	raw, ok := rawjson.Get(params, "requestState")
	if !ok || string(raw) == "null" {
		return params, nil
	}
	token, _ := rawjson.GetString(params, "requestState")
	c, ok := v.tasks.openState(token)
	if !ok || c.Upstream != upstream || !c.ownedBy(taskOwnerFrom(ctx)) {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "requestState is not one this gateway handed to you for this request; send the request again without requestState and inputResponses")
	}
	out, err := rawjson.SetString(params, "requestState", c.ID)
	if err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "requestState: %v", err)
	}
	return out, nil
}

// sealRequestState replaces the requestState of upstream's input_required
// result with one bound to the caller.
func (v *View) sealRequestState(ctx context.Context, upstream string, resp *jsonrpc.Message) {
	if resp == nil || resp.Error != nil {
		return
	}
	if rt, _ := rawjson.GetString(resp.Result, "resultType"); rt != "input_required" {
		return
	}
	state, ok := rawjson.GetString(resp.Result, "requestState")
	if !ok {
		return
	}
	c := claims(upstream, state, formState, taskOwnerFrom(ctx), v.ups[upstream].Config().Stateful)
	if res, err := rawjson.SetString(resp.Result, "requestState", v.tasks.sealState(c)); err == nil {
		resp.Result = res
	}
}
