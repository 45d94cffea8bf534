package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// minFragment is the shortest whole string of message text searched for in logs.
const minFragment = 12

// Shorter pieces of a message are searched for too: every run of fragmentWords
// consecutive words of at least minWordsRunes runes ("rolled back payments",
// "pool is exhausted"), and in text without spaces (Chinese) every run of
// minCJKFragment runes. Single words and shorter runs occur in log messages and ids by
// chance ("connection", "error rate").
const (
	fragmentWords  = 3
	minWordsRunes  = 10
	minCJKFragment = 4
)

// textFragments adds to set the pieces of s the log scan looks for.
func textFragments(s string, set map[string]bool) {
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) >= minFragment && !strings.HasPrefix(s, "http") {
		set[s] = true
	}
	words := strings.Fields(s)
	for i := 0; i+fragmentWords <= len(words); i++ {
		run := strings.Join(words[i:i+fragmentWords], " ")
		if utf8.RuneCountInString(run) >= minWordsRunes && !strings.Contains(run, "http") {
			set[run] = true
		}
	}
	for _, w := range words {
		var cjk []rune
		flush := func() {
			for i := 0; i+minCJKFragment <= len(cjk); i++ {
				set[string(cjk[i:i+minCJKFragment])] = true
			}
			cjk = cjk[:0]
		}
		for _, r := range w {
			if unicode.Is(unicode.Han, r) {
				cjk = append(cjk, r)
			} else {
				flush()
			}
		}
		flush()
	}
}

// messageFragments is every piece of message text the scenario carries (received
// contents and edits): each string leaf of a content JSON, and its shorter pieces
// (textFragments).
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
				textFragments(v, set)
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

// logScan is what a scan of every process's log found.
type logScan struct {
	findings []logFinding
	// lines read, by process
	lines map[string]int
	// notJSON are lines that bypassed the logger.
	notJSON []string
	// exitErrors counts the error reports a process prints when it exits on an error
	// (`larkline run: …` on stderr, the lines that follow it up to the next JSON line
	// included): the command's own output, not a log line. They are scanned for message
	// text like everything else.
	exitErrors int
}

// scanLogs reads every process's log and reports each line carrying message text, and
// how many lines were read per process; a line that is not JSON is reported too (the
// processes log JSON, so anything else escaped the logger), unless it is part of the
// error report of a process that exited.
func (p *pipeline) scanLogs() (logScan, error) {
	return p.scanLogsFor(p.messageFragments())
}

// scanLogsFor is scanLogs for the given fragments of text.
func (p *pipeline) scanLogsFor(frags []string) (logScan, error) {
	if len(frags) == 0 {
		return logScan{}, fmt.Errorf("the scenario has no message text to look for")
	}
	ix := newFragmentIndex(frags)
	r := logScan{lines: map[string]int{}}
	for _, l := range p.layout {
		pr := p.procs[l.name]
		f, err := os.Open(pr.logPath)
		if err != nil {
			return r, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		n := 0
		exiting := false
		for sc.Scan() {
			n++
			text := sc.Text()
			switch {
			case json.Valid([]byte(text)):
				exiting = false
			case strings.HasPrefix(text, "larkline "):
				exiting = true
				r.exitErrors++
			case !exiting:
				r.notJSON = append(r.notJSON, fmt.Sprintf("%s:%d: %.200s", l.name, n, text))
			}
			// JSON escapes quotes and control characters; compare against the
			// decoded string values too.
			decoded := text
			var v any
			if json.Unmarshal([]byte(text), &v) == nil {
				decoded = strings.Join(stringLeaves(v, nil), "\n")
			}
			found := map[string]bool{}
			ix.each(text, found)
			ix.each(decoded, found)
			for fr := range found {
				r.findings = append(r.findings, logFinding{proc: l.name, line: n, fragment: fr})
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return r, fmt.Errorf("reading %s: %w", pr.logPath, err)
		}
		r.lines[l.name] = n
	}
	return r, nil
}

// fragmentIndex finds many fragments in a text in one pass: fragments by their first
// fragmentKey bytes (every fragment is longer), each position of the text looked up.
// A chaos run scans hundreds of thousands of log lines for thousands of fragments.
type fragmentIndex map[string][]string

const fragmentKey = 8

func newFragmentIndex(frags []string) fragmentIndex {
	ix := fragmentIndex{}
	for _, f := range frags {
		if len(f) < fragmentKey {
			continue // textFragments makes none this short
		}
		ix[f[:fragmentKey]] = append(ix[f[:fragmentKey]], f)
	}
	return ix
}

// each marks in found every fragment text contains.
func (ix fragmentIndex) each(text string, found map[string]bool) {
	for i := 0; i+fragmentKey <= len(text); i++ {
		for _, f := range ix[text[i:i+fragmentKey]] {
			if strings.HasPrefix(text[i:], f) {
				found[f] = true
			}
		}
	}
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
