package windows

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The group table and the loop topic are internal to one processor version, so their
// values use a compact binary encoding rather than JSON: a window value is decoded and
// re-encoded on every evidence version it receives, which made JSON the processor's
// largest cost. Every value starts with a format byte; an unknown format fails the
// processor loudly instead of misreading state. Format 2 added paged windows (page
// count, pending page, the recall flag of a logged ref, page values) and the loop
// fields that move pages. Format 3 added each ref's version rank (source_updated_at
// and deleted flag) and a chat's coverage held by the evidence barrier. Formats 1
// and 2 still decode (ranks unknown, nothing held), so a processor version's state
// survives the upgrade.

const (
	formatV1 byte = 1
	formatV2 byte = 2
	formatV3 byte = 3
	// formatCurrent is the format Encode writes.
	formatCurrent = formatV3

	tagChat   byte = 1
	tagWindow byte = 2
	tagPage   byte = 3
)

// ErrStateFormat means a table or loop value was written by an unknown encoding.
var ErrStateFormat = errors.New("windows: unknown state encoding")

type enc struct{ b []byte }

func (e *enc) byte(v byte)     { e.b = append(e.b, v) }
func (e *enc) varint(v int64)  { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) uvarint(v int)   { e.b = binary.AppendUvarint(e.b, uint64(v)) }
func (e *enc) string(s string) { e.uvarint(len(s)); e.b = append(e.b, s...) }
func (e *enc) bool(v bool) {
	if v {
		e.byte(1)
	} else {
		e.byte(0)
	}
}

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

func (d *dec) string() string {
	n := d.uvarint(maxStateItems)
	if d.err == nil && n > len(d.b) {
		d.fail("string")
	}
	if d.err != nil {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *dec) bool() bool { return d.byte() == 1 }

func (d *dec) done(what string) error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes after %s", ErrStateFormat, len(d.b), what)
	}
	return d.err
}

func encodeRef(e *enc, r msgRef) {
	e.string(r.ID)
	e.varint(r.At)
	e.string(r.Hash)
	e.bool(r.Del)
	e.varint(r.Upd)
	e.bool(r.Deleted)
}

func decodeRef(d *dec, format byte) msgRef {
	r := msgRef{ID: d.string(), At: d.varint(), Hash: d.string()}
	if format >= formatV2 {
		r.Del = d.bool()
	}
	if format >= formatV3 {
		r.Upd = d.varint()
		r.Deleted = d.bool()
	}
	return r
}

func encodeRefs(e *enc, refs []msgRef) {
	e.uvarint(len(refs))
	for _, r := range refs {
		encodeRef(e, r)
	}
}

func decodeRefs(d *dec, format byte) []msgRef {
	n := d.uvarint(maxStateItems)
	if n == 0 || d.err != nil {
		return nil
	}
	refs := make([]msgRef, n)
	for i := range refs {
		refs[i] = decodeRef(d, format)
	}
	return refs
}

// readFormat reads the format byte; ok is false (and d.err set) for unknown formats.
func readFormat(d *dec) (byte, error) {
	f := d.byte()
	if d.err == nil && f != formatV1 && f != formatV2 && f != formatV3 {
		return 0, fmt.Errorf("%w: format %d", ErrStateFormat, f)
	}
	return f, nil
}

// tableCodec is the goka codec of the group table (values *tableValue).
type tableCodec struct{}

func (tableCodec) Encode(v any) ([]byte, error) {
	tv, ok := v.(*tableValue)
	if !ok || tv == nil {
		return nil, fmt.Errorf("windows: table codec cannot encode %T", v)
	}
	e := enc{b: make([]byte, 0, 64)}
	e.byte(formatCurrent)
	switch {
	case tv.Chat != nil:
		c := tv.Chat
		e.byte(tagChat)
		e.varint(c.CoveredUntil)
		e.uvarint(len(c.Open))
		for _, o := range c.Open {
			e.varint(o.Start)
			e.varint(o.FirstSeen)
		}
		e.uvarint(len(c.Held))
		for _, h := range c.Held {
			e.varint(h.Until)
			e.varint(h.End)
		}
	case tv.Window != nil:
		w := tv.Window
		e.byte(tagWindow)
		e.varint(w.Start)
		e.varint(w.FirstSeen)
		e.varint(w.ClosedAt)
		e.string(w.Reason)
		e.uvarint(w.Count)
		e.uvarint(w.Late)
		encodeRefs(&e, w.Msgs)
		e.uvarint(w.Pages)
		encodeRefs(&e, w.Pending)
	case tv.Page != nil:
		e.byte(tagPage)
		encodeRefs(&e, tv.Page.Refs)
	default:
		return nil, errors.New("windows: empty table value")
	}
	return e.b, nil
}

// maxStateItems bounds a decoded list so corrupt bytes cannot allocate without limit.
const maxStateItems = 1 << 20

func (tableCodec) Decode(b []byte) (any, error) {
	d := dec{b: b}
	format, err := readFormat(&d)
	if err != nil {
		return nil, err
	}
	tv := &tableValue{}
	switch tag := d.byte(); tag {
	case tagChat:
		c := &chatState{CoveredUntil: d.varint()}
		n := d.uvarint(maxStateItems)
		if n > 0 && d.err == nil {
			c.Open = make([]openWindow, n)
			for i := range c.Open {
				c.Open[i] = openWindow{Start: d.varint(), FirstSeen: d.varint()}
			}
		}
		if format >= formatV3 {
			if n := d.uvarint(maxStateItems); n > 0 && d.err == nil {
				c.Held = make([]heldCoverage, n)
				for i := range c.Held {
					c.Held[i] = heldCoverage{Until: d.varint(), End: d.varint()}
				}
			}
		}
		tv.Chat = c
	case tagWindow:
		w := &windowState{Start: d.varint(), FirstSeen: d.varint(), ClosedAt: d.varint(), Reason: d.string()}
		w.Count = d.uvarint(maxStateItems)
		w.Late = d.uvarint(1 << 62)
		w.Msgs = decodeRefs(&d, format)
		if format >= formatV2 {
			w.Pages = d.uvarint(maxStateItems)
			w.Pending = decodeRefs(&d, format)
		}
		tv.Window = w
	case tagPage:
		if format < formatV2 {
			return nil, fmt.Errorf("%w: page value in format %d", ErrStateFormat, format)
		}
		tv.Page = &pageState{Refs: decodeRefs(&d, format)}
	default:
		if d.err == nil {
			return nil, fmt.Errorf("%w: value tag %d", ErrStateFormat, tag)
		}
	}
	if err := d.done("table value"); err != nil {
		return nil, err
	}
	return tv, nil
}

var loopOps = []loopOp{opEvidence, opOpened, opClose, opSeal, opSealed, opCollect}

// loopCodec is the goka codec of the loop topic (values *loopMsg).
type loopCodec struct{}

func (loopCodec) Encode(v any) ([]byte, error) {
	m, ok := v.(*loopMsg)
	if !ok || m == nil {
		return nil, fmt.Errorf("windows: loop codec cannot encode %T", v)
	}
	e := enc{b: make([]byte, 0, 128)}
	e.byte(formatCurrent)
	op := -1
	for i, o := range loopOps {
		if o == m.Op {
			op = i
		}
	}
	if op < 0 {
		return nil, fmt.Errorf("windows: unknown loop op %q", m.Op)
	}
	e.byte(byte(op))
	encodeRef(&e, m.Ref)
	e.bool(m.Deleted)
	e.varint(m.Start)
	e.varint(m.FirstSeen)
	e.string(m.Reason)
	e.varint(m.ClosedAt)
	e.uvarint(m.Page)
	e.uvarint(m.Pages)
	encodeRefs(&e, m.Refs)
	encodeRefs(&e, m.Pending)
	encodeRefs(&e, m.Tail)
	return e.b, nil
}

func (loopCodec) Decode(b []byte) (any, error) {
	d := dec{b: b}
	format, err := readFormat(&d)
	if err != nil {
		return nil, err
	}
	op := int(d.byte())
	if d.err == nil && op >= len(loopOps) {
		return nil, fmt.Errorf("%w: loop op %d", ErrStateFormat, op)
	}
	m := &loopMsg{}
	if d.err == nil {
		m.Op = loopOps[op]
	}
	m.Ref = decodeRef(&d, format)
	m.Deleted = d.bool()
	m.Start, m.FirstSeen, m.Reason, m.ClosedAt = d.varint(), d.varint(), d.string(), d.varint()
	if format >= formatV2 {
		m.Page, m.Pages = d.uvarint(maxStateItems), d.uvarint(maxStateItems)
		m.Refs, m.Pending, m.Tail = decodeRefs(&d, format), decodeRefs(&d, format), decodeRefs(&d, format)
	}
	if err := d.done("loop message"); err != nil {
		return nil, err
	}
	return m, nil
}
