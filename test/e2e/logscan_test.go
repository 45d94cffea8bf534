package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"unicode/utf8"
)

// minFragment is the shortest piece of message text searched for in logs: shorter
// strings ("ok", "p1") occur in ids and words by chance.
const minFragment = 12

// messageFragments is every piece of message text the scenario carries (received
// contents and edits), each string leaf of a content JSON of at least minFragment
// runes.
func (p *pipeline) messageFragments() []string {
	set := map[string]bool{}
	add := func(content string) {
		var v any
		if json.Unmarshal([]byte(content), &v) != nil {
			return
		}
		var walk func(any)
		walk = func(v any) {
			switch v := v.(type) {
			case string:
				if s := strings.TrimSpace(v); utf8.RuneCountInString(s) >= minFragment && !strings.HasPrefix(s, "http") {
					set[s] = true
				}
			case []any:
				for _, x := range v {
					walk(x)
				}
			case map[string]any:
				for k, x := range v {
					switch k { // keys, ids and tags, not text
					case "tag", "user_id", "image_key", "file_key", "style", "href", "language":
						continue
					}
					walk(x)
				}
			}
		}
		walk(v)
	}
	for _, e := range p.sc.Events() {
		var env struct {
			Event struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"event"`
		}
		if json.Unmarshal(e.Body, &env) == nil {
			add(env.Event.Message.Content)
		}
	}
	for _, e := range p.sc.Edits() {
		add(e.Content)
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// logFinding is message text found in a log line.
type logFinding struct {
	proc     string
	line     int
	fragment string
}

// scanLogs reads every process's log and reports each line carrying message text, and
// how many lines were read per process; a line that is not JSON is reported too (the
// processes log JSON, so anything else escaped the logger).
func (p *pipeline) scanLogs() (findings []logFinding, lines map[string]int, notJSON []string, err error) {
	frags := p.messageFragments()
	if len(frags) == 0 {
		return nil, nil, nil, fmt.Errorf("the scenario has no message text to look for")
	}
	lines = map[string]int{}
	for _, l := range layout {
		pr := p.procs[l.name]
		f, err := os.Open(pr.logPath)
		if err != nil {
			return nil, nil, nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		n := 0
		for sc.Scan() {
			n++
			text := sc.Text()
			if !json.Valid([]byte(text)) {
				notJSON = append(notJSON, fmt.Sprintf("%s:%d: %.200s", l.name, n, text))
			}
			// JSON escapes quotes and control characters; compare against the
			// decoded string values too.
			decoded := text
			var v any
			if json.Unmarshal([]byte(text), &v) == nil {
				decoded = strings.Join(stringLeaves(v, nil), "\n")
			}
			for _, fr := range frags {
				if strings.Contains(text, fr) || strings.Contains(decoded, fr) {
					findings = append(findings, logFinding{proc: l.name, line: n, fragment: fr})
				}
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, nil, nil, fmt.Errorf("reading %s: %w", pr.logPath, err)
		}
		lines[l.name] = n
	}
	return findings, lines, notJSON, nil
}

// stringLeaves appends every string (and key) of a decoded JSON value.
func stringLeaves(v any, out []string) []string {
	switch v := v.(type) {
	case string:
		out = append(out, v)
	case []any:
		for _, x := range v {
			out = stringLeaves(x, out)
		}
	case map[string]any:
		for k, x := range v {
			out = stringLeaves(x, append(out, k))
		}
	}
	return out
}
