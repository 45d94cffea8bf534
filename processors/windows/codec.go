package windows

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The group table and the loop topic are internal to one processor version, so their
// values use a compact binary encoding: a chat value is decoded and re-encoded on
// every record of its chat. Every value starts with a format byte; an unknown format
// fails the processor loudly instead of misreading state.
//
// State format 4 is one value per chat (chatValue). State format 5 adds the note
// chains of D28: a chat value's Run and RunNext after Applied, a note's Run and
// After after its Offset; format 4 values decode with them zero. Any other state
// format is refused with ErrStateFormat: state is not migrated, a deployment moves
// to a new state format under a new processor version (larkline replay), which
// rebuilds its state from the evidence topic beside the old version.

const (
	formatV4 byte = 4
	formatV5 byte = 5
	// formatCurrent is the format Encode writes.
	formatCurrent = formatV5

	tagChat byte = 1
	tagLoop byte = 2
)

// ErrStateFormat means a table or loop value is corrupt or of a state format this
// binary does not read: replay under a new processor version (larkline replay
// --processor-version ...).
var ErrStateFormat = errors.New("windows: unknown state format")

// maxStateItems bounds a decoded list so corrupt bytes cannot allocate without limit.
const maxStateItems = 1 << 16

type enc struct{ b []byte }

func (e *enc) byte(v byte)    { e.b = append(e.b, v) }
func (e *enc) varint(v int64) { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) uvarint(v int)  { e.b = binary.AppendUvarint(e.b, uint64(v)) }
func (e *enc) u64(v uint64)   { e.b = binary.LittleEndian.AppendUint64(e.b, v) }

type dec struct {
	b   []byte
	err error
}

func (d *dec) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated or corrupt %s", ErrStateFormat, what)
	}
}

func (d *dec) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail("byte")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *dec) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) uvarint(max int) int {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > uint64(max) {
		d.fail("length")
		return 0
	}
	d.b = d.b[n:]
	return int(v)
}

func (d *dec) u64() uint64 {
	if d.err != nil || len(d.b) < 8 {
		d.fail("word")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *dec) done(what string) error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes after %s", ErrStateFormat, len(d.b), what)
	}
	return d.err
}

// header reads the format byte and the tag, refusing other formats and tags, and
// returns the format.
func (d *dec) header(tag byte) (byte, error) {
	f := d.byte()
	if d.err != nil {
		return 0, d.err
	}
	if f != formatV4 && f != formatV5 {
		return 0, fmt.Errorf("%w: state format %d, this binary reads %d and %d; replay under a new processor version", ErrStateFormat, f, formatV4, formatV5)
	}
	if t := d.byte(); d.err == nil && t != tag {
		return 0, fmt.Errorf("%w: tag %d, want %d", ErrStateFormat, t, tag)
	}
	return f, d.err
}

// window flags
const (
	flagCovered   = 1 << 0
	flagOversized = 1 << 1
)

func encodeChat(c *chatValue) []byte {
	e := enc{b: make([]byte, 0, 32+len(c.Open)*40+len(c.Closed)*8)}
	e.byte(formatCurrent)
	e.byte(tagChat)
	e.varint(c.Applied)
	e.u64(c.Run)
	e.varint(c.RunNext)
	e.varint(c.CoveredUntil)
	e.uvarint(len(c.Held))
	for _, h := range c.Held {
		e.varint(h.Until)
		e.varint(h.End)
	}
	e.varint(c.ClosedBase)
	e.uvarint(len(c.Closed))
	for _, w := range c.Closed {
		e.u64(w)
	}
	e.uvarint(len(c.Open))
	prev := int64(0)
	for i := range c.Open {
		w := &c.Open[i]
		e.varint(w.Start - prev) // ascending: small deltas
		prev = w.Start
		e.byte(byte(w.Status))
		e.varint(w.Versions)
		e.varint(w.Low)
		e.varint(w.High - w.Low)
		e.varint(w.FirstAt - w.Start)
		e.varint(w.LastAt - w.Start)
		e.varint(w.FirstSeen)
		e.varint(w.ClosedAt)
		e.varint(w.EmittedAt)
		var f byte
		if w.Covered {
			f |= flagCovered
		}
		if w.Oversized {
			f |= flagOversized
		}
		e.byte(f)
	}
	return e.b
}

func decodeChat(b []byte) (*chatValue, error) {
	d := dec{b: b}
	f, err := d.header(tagChat)
	if err != nil {
		return nil, err
	}
	c := &chatValue{Applied: d.varint()}
	if f >= formatV5 {
		c.Run, c.RunNext = d.u64(), d.varint()
	}
	c.CoveredUntil = d.varint()
	if n := d.uvarint(maxHeldCoverage); n > 0 && d.err == nil {
		c.Held = make([]heldCoverage, n)
		for i := range c.Held {
			c.Held[i] = heldCoverage{Until: d.varint(), End: d.varint()}
		}
	}
	c.ClosedBase = d.varint()
	if n := d.uvarint(maxStateItems); n > 0 && d.err == nil {
		if n*8 > len(d.b) {
			d.fail("bitmap")
		} else {
			c.Closed = make([]uint64, n)
			for i := range c.Closed {
				c.Closed[i] = d.u64()
			}
		}
	}
	if n := d.uvarint(maxStateItems); n > 0 && d.err == nil {
		if n > len(d.b) {
			d.fail("windows")
		} else {
			c.Open = make([]window, n)
			prev := int64(0)
			for i := range c.Open {
				w := &c.Open[i]
				w.Start = prev + d.varint()
				prev = w.Start
				w.Status = winStatus(d.byte())
				w.Versions = d.varint()
				w.Low = d.varint()
				w.High = w.Low + d.varint()
				w.FirstAt = w.Start + d.varint()
				w.LastAt = w.Start + d.varint()
				w.FirstSeen = d.varint()
				w.ClosedAt = d.varint()
				w.EmittedAt = d.varint()
				f := d.byte()
				w.Covered, w.Oversized = f&flagCovered != 0, f&flagOversized != 0
				if d.err == nil && w.Status != statusOpen && w.Status != statusClosing {
					d.err = fmt.Errorf("%w: window status %d", ErrStateFormat, w.Status)
				}
			}
		}
	}
	if err := d.done("chat value"); err != nil {
		return nil, err
	}
	return c, nil
}

// tableCodec is the goka codec of the group table (values *chatValue).
type tableCodec struct{}

func (tableCodec) Encode(v any) ([]byte, error) {
	c, ok := v.(*chatValue)
	if !ok || c == nil {
		return nil, fmt.Errorf("windows: table codec cannot encode %T", v)
	}
	return encodeChat(c), nil
}

func (tableCodec) Decode(b []byte) (any, error) { return decodeChat(b) }

func encodeLoop(m *loopMsg) []byte {
	e := enc{b: make([]byte, 0, 24)}
	e.byte(formatCurrent)
	e.byte(tagLoop)
	e.byte(byte(m.Op))
	switch m.Op {
	case opNote:
		e.varint(m.Offset)
		e.u64(m.Run)
		e.varint(m.After)
		e.byte(byte(m.Kind))
		e.varint(m.At)
	case opClose:
		e.varint(m.Start)
		e.varint(m.Decided)
	}
	return e.b
}

func decodeLoop(b []byte) (*loopMsg, error) {
	d := dec{b: b}
	f, err := d.header(tagLoop)
	if err != nil {
		return nil, err
	}
	m := &loopMsg{Op: loopOp(d.byte())}
	switch m.Op {
	case opNote:
		m.Offset = d.varint()
		if f >= formatV5 {
			m.Run, m.After = d.u64(), d.varint()
		}
		m.Kind = noteKind(d.byte())
		m.At = d.varint()
	case opClose:
		m.Start = d.varint()
		m.Decided = d.varint()
	case opTidy:
	default:
		if d.err == nil {
			return nil, fmt.Errorf("%w: loop op %d", ErrStateFormat, m.Op)
		}
	}
	if err := d.done("loop message"); err != nil {
		return nil, err
	}
	return m, nil
}

// loopCodec is the goka codec of the loop topic (values *loopMsg).
type loopCodec struct{}

func (loopCodec) Encode(v any) ([]byte, error) {
	m, ok := v.(*loopMsg)
	if !ok || m == nil {
		return nil, fmt.Errorf("windows: loop codec cannot encode %T", v)
	}
	return encodeLoop(m), nil
}

func (loopCodec) Decode(b []byte) (any, error) { return decodeLoop(b) }
