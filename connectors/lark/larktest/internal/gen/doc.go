// Package main (gen) generates larktest's bundled incident scenario
// (connectors/lark/larktest/scenarios/incident.jsonl) from a fixed story and a
// deterministic seed. It builds the scenario through larktest's own Builder and
// Scenario.Add methods, so every line it writes passes the scenario loader.
// It is a development tool: nothing imports it, and it has no runtime role.
package main
