// Package configs holds the configuration files shipped inside the mcpgw
// binary.
package configs

import _ "embed"

// Default is default.yaml, the configuration `mcpgw run` serves when no
// --config is given. Its command expands ${MCPGW_EXECUTABLE}, which the CLI
// sets to the running binary's path. Treat it as read-only.
//
//go:embed default.yaml
var Default []byte

// Example is example.yaml, a commented tour of every section, for operators
// starting a config of their own. Treat it as read-only.
//
//go:embed example.yaml
var Example []byte
