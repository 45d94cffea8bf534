package larktest

import (
	"bytes"
	_ "embed"
	"fmt"
)

//go:embed scenarios/incident.jsonl
var incidentJSONL []byte

// IncidentJSONL returns the bundled incident scenario file.
func IncidentJSONL() []byte { return bytes.Clone(incidentJSONL) }

// Incident parses the bundled incident scenario: one group chat bound to one
// firing workspace, about four hours of incident conversation.
func Incident() (*Scenario, error) {
	s, err := Parse(bytes.NewReader(incidentJSONL))
	if err != nil {
		return nil, fmt.Errorf("larktest: bundled incident scenario: %w", err)
	}
	return s, nil
}
