package ids

import "fmt"

// Stage names a larkline stage. It is the stage's one name: its role in the
// configuration and on the command line, the log component of its main part, the
// prefix of its metrics (larkline_<stage>_), the stage its dead letters carry, and
// the word the docs use (D30).
type Stage string

// The stages, in pipeline order.
const (
	StageIngest     Stage = "ingest"     // Lark events → evidence topic
	StageReconcile  Stage = "reconcile"  // Lark history → evidence topic
	StageSink       Stage = "sink"       // evidence topic → Postgres
	StageWindows    Stage = "windows"    // evidence topic → closed windows (the window processor)
	StageSynthesis  Stage = "synthesis"  // closed windows → timeline entries and summaries
	StageWorkspaces Stage = "workspaces" // workspace feed → Postgres
	StageRetention  Stage = "retention"  // redaction and deletion of aged evidence
	StageAPI        Stage = "api"        // the timeline API and page
	StageLag        Stage = "lag"        // the consumer-lag exporter
)

// Stages lists every stage, in pipeline order.
var Stages = []Stage{StageIngest, StageReconcile, StageSink, StageWindows, StageSynthesis,
	StageWorkspaces, StageRetention, StageAPI, StageLag}

// formerStages are names dead letters carried before D30; ParseStage reads them so a
// record parked then keeps its stage.
var formerStages = map[string]Stage{"evidence_sink": StageSink, "workspace_feed": StageWorkspaces}

// ParseStage returns the stage named s, reading the former names of dead letters too.
func ParseStage(s string) (Stage, error) {
	if st, ok := formerStages[s]; ok {
		return st, nil
	}
	for _, st := range Stages {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("%w: unknown stage %q (one of %v)", ErrInvalidID, s, Stages)
}
