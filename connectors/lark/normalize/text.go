package normalize

import (
	"crypto/sha256"
	"hash"
	"unicode"
	"unicode/utf8"
)

// TruncationMarker ends a text that was cut to Options.MaxTextBytes.
const TruncationMarker = " …[truncated]"

// textSink receives the rendered text of one message as a stream. It
//
//   - drops control characters other than '\n' and '\t' (Postgres text cannot hold NUL)
//     and replaces invalid UTF-8 with U+FFFD;
//   - trims leading and trailing white space;
//   - hashes the whole cleaned text (so an edit past the length limit still changes
//     the content hash) while retaining at most limit bytes, cut at a rune boundary.
//
// Memory is bounded by limit plus the longest run of white space, whatever the input.
type textSink struct {
	limit    int
	buf      []byte // retained prefix, whole runes only, len ≤ limit
	overflow bool   // something did not fit into buf
	total    int    // bytes of cleaned text, retained or not
	started  bool   // a non-space rune was written
	pending  []byte // white space seen since the last non-space rune
	h        hash.Hash
	hbuf     []byte // batches hash writes
}

const hashBatch = 4096

func newTextSink(limit, sizeHint int) *textSink {
	if sizeHint > limit {
		sizeHint = limit
	}
	return &textSink{
		limit: limit,
		buf:   make([]byte, 0, sizeHint),
		h:     sha256.New(),
		hbuf:  make([]byte, 0, min(hashBatch, sizeHint)),
	}
}

type runeClass uint8

const (
	classOrdinary runeClass = iota
	classSpace
	classDrop
	classInvalid
)

func classify(r rune, size int) runeClass {
	switch {
	case r == utf8.RuneError && size <= 1:
		return classInvalid
	case r == ' ' || r == '\n' || r == '\t':
		return classSpace
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		return classDrop
	case unicode.IsSpace(r):
		return classSpace
	default:
		return classOrdinary
	}
}

// WriteString appends s to the stream.
func (s *textSink) WriteString(str string) {
	start := 0
	for i := 0; i < len(str); {
		if c := str[i]; c > ' ' && c < 0x7f {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(str[i:])
		class := classify(r, size)
		if class == classOrdinary {
			i += size
			continue
		}
		s.ordinary(str[start:i])
		switch class {
		case classSpace:
			if s.started {
				s.pending = append(s.pending, str[i:i+size]...)
			}
		case classInvalid:
			s.ordinary(string(utf8.RuneError))
		}
		i += size
		start = i
	}
	s.ordinary(str[start:])
}

// Newline ends a line unless the stream is empty or already ends a line.
func (s *textSink) Newline() {
	if !s.started {
		return
	}
	for n := len(s.pending); n > 0 && (s.pending[n-1] == ' ' || s.pending[n-1] == '\t'); n-- {
		s.pending = s.pending[:n-1]
	}
	if n := len(s.pending); n > 0 && s.pending[n-1] == '\n' {
		return
	}
	s.pending = append(s.pending, '\n')
}

// Space separates two words unless white space is already pending.
func (s *textSink) Space() {
	if s.started && len(s.pending) == 0 {
		s.pending = append(s.pending, ' ')
	}
}

func (s *textSink) ordinary(run string) {
	if run == "" {
		return
	}
	if len(s.pending) > 0 {
		s.emit(string(s.pending))
		s.pending = s.pending[:0]
	}
	s.started = true
	s.emit(run)
}

func (s *textSink) emit(run string) {
	s.total += len(run)
	if len(s.hbuf)+len(run) > hashBatch {
		s.h.Write(s.hbuf)
		s.hbuf = s.hbuf[:0]
		if len(run) > hashBatch {
			s.h.Write([]byte(run))
			s.retain(run)
			return
		}
	}
	s.hbuf = append(s.hbuf, run...)
	s.retain(run)
}

func (s *textSink) retain(run string) {
	if s.overflow {
		return
	}
	if room := s.limit - len(s.buf); len(run) > room {
		s.buf = append(s.buf, cutAtRune(run, room)...)
		s.overflow = true
		return
	}
	s.buf = append(s.buf, run...)
}

// Len is the number of bytes written so far (after cleaning and trimming).
func (s *textSink) Len() int { return s.total }

// finish returns the bounded text, whether it was truncated, the byte length of the
// whole cleaned text and the SHA-256 of the whole cleaned text.
func (s *textSink) finish() (text string, truncated bool, total int, digest [sha256.Size]byte) {
	s.h.Write(s.hbuf)
	s.hbuf = s.hbuf[:0]
	s.h.Sum(digest[:0])
	if !s.overflow {
		return string(s.buf), false, s.total, digest
	}
	keep := cutAtRune(string(s.buf), s.limit-len(TruncationMarker))
	keep = trimRightSpace(keep)
	return keep + TruncationMarker, true, s.total, digest
}

// cutAtRune returns the longest prefix of s of at most n bytes that does not split a
// UTF-8 sequence.
func cutAtRune(s string, n int) string {
	if n >= len(s) {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func trimRightSpace(s string) string {
	for len(s) > 0 {
		r, size := utf8.DecodeLastRuneInString(s)
		if !unicode.IsSpace(r) {
			break
		}
		s = s[:len(s)-size]
	}
	return s
}

// cleanString sanitizes a short free-text value for metadata (a file name, a display
// name): control characters dropped, invalid UTF-8 replaced, white space runs folded to
// one space, trimmed, and cut at a rune boundary to maxBytes.
func cleanString(str string, maxBytes int) string {
	out := make([]byte, 0, min(len(str), maxBytes))
	space := false
	for i := 0; i < len(str) && len(out) < maxBytes; {
		r, size := utf8.DecodeRuneInString(str[i:])
		i += size
		switch classify(r, size) {
		case classDrop:
			continue
		case classSpace:
			space = len(out) > 0
			continue
		case classInvalid:
			r = utf8.RuneError
		}
		need := utf8.RuneLen(r)
		if space {
			need++
		}
		if len(out)+need > maxBytes {
			break
		}
		if space {
			out = append(out, ' ')
			space = false
		}
		out = utf8.AppendRune(out, r)
	}
	return string(out)
}
