package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
)

// stdioEchoRole is the stdio floor: a newline-delimited JSON-RPC server
// that answers initialize, tools/list and tools/call of echo and nothing
// more, with encoding/json on a few fields and one buffered write per
// burst of input. It shows what mcpgw's stdio path costs and can carry
// when the child is not what saturates (the go-sdk demo server, the other
// stdio row, spends more CPU per call than mcpgw does).
func stdioEchoRole() error {
	br := bufio.NewReaderSize(os.Stdin, 64<<10)
	bw := bufio.NewWriterSize(os.Stdout, 64<<10)
	type request struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ProtocolVersion string `json:"protocolVersion"`
			Arguments       struct {
				Text string `json:"text"`
			} `json:"arguments"`
		} `json:"params"`
	}
	answer := func(id json.RawMessage, result any) error {
		b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
		if err != nil {
			return err
		}
		_, err = bw.Write(append(b, '\n'))
		return err
	}
	for {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var req request
		if json.Unmarshal(line, &req) != nil || req.ID == nil {
			continue // notifications, and anything that is not a request
		}
		switch req.Method {
		case "initialize":
			v := req.Params.ProtocolVersion
			if v == "" {
				v = "2025-11-25"
			}
			err = answer(req.ID, map[string]any{"protocolVersion": v, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "stdio-echo", "version": "1"}})
		case "tools/list":
			err = answer(req.ID, map[string]any{"tools": []any{map[string]any{"name": "echo", "description": "Echo the given text back.",
				"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}}}})
		case "tools/call":
			err = answer(req.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": req.Params.Arguments.Text}}})
		case "ping":
			err = answer(req.ID, map[string]any{})
		default:
			var b []byte
			b, err = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "method not found: " + req.Method}})
			if err == nil {
				_, err = bw.Write(append(b, '\n'))
			}
		}
		if err != nil {
			return err
		}
		if br.Buffered() == 0 { // the burst is answered: one write for it
			if err := bw.Flush(); err != nil {
				return err
			}
		}
	}
}
