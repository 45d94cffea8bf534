// Command larkline runs larkline's pipeline stages and its operator commands.
//
//	larkline demo                         the whole pipeline on the embedded default
//	larkline run --roles workspaces,ingest,reconcile,sink,windows,synthesis,api,lag,retention
//	larkline migrate                      apply the Postgres schema migrations
//	larkline topics ensure                create or check every Kafka topic
//	larkline versions list|start|diff|promote|retire   processor versions side by side
//	larkline windows retry --workspace W --window T    synthesize one window again
//	larkline schemas register|check       the record schemas in the registry
//	larkline lag                          consumer lag per group, topic and partition
//	larkline workspaces put|status|get|publish, larkline bind add|remove|list
//	larkline refresh --workspace W        manual refresh from Lark history
//	larkline retention run [--dry-run]    redact or delete evidence past retention
//	larkline deadletters list|redrive     parked records: list them, feed them back through their stage
//
// Every command reads one YAML configuration file (--config, or LARKLINE_CONFIG) whose
// keys can all be overridden from the environment (docs/configuration.md).
package main
