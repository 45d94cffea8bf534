package schemas

import (
	"errors"
	"fmt"
	"math"
)

// Bounds of the structural check that runs before goavro decodes a body. goavro
// sizes arrays and maps by the block count it reads, so a corrupted count could
// make it allocate gigabytes; the check proves every count is backed by bytes first.
const (
	// maxNesting bounds how deep records, arrays, maps and unions may nest.
	maxNesting = 64
	// maxElements bounds the array and map elements of one record.
	maxElements = 1 << 20
)

var (
	errShort   = errors.New("buffer ends early")
	stringNode = &node{kind: kindString}
)

// checkBinary walks buf as the Avro binary encoding of n without allocating and
// fails unless it is exactly one well-formed datum: every length and block count
// fits the remaining bytes, every union and enum index is in range, booleans are
// 0 or 1, ints fit 32 bits, nothing trails the datum.
func checkBinary(n *node, buf []byte) error {
	w := walker{buf: buf}
	if err := w.walk(n, 0); err != nil {
		return fmt.Errorf("at byte %d: %w", w.pos, err)
	}
	if w.pos != len(buf) {
		return fmt.Errorf("%d trailing bytes after the record", len(buf)-w.pos)
	}
	return nil
}

type walker struct {
	buf      []byte
	pos      int
	elements int
}

func (w *walker) remaining() int { return len(w.buf) - w.pos }

func (w *walker) varint() (int64, error) {
	var u uint64
	for shift := uint(0); shift < 70; shift += 7 {
		if w.pos >= len(w.buf) {
			return 0, errShort
		}
		b := w.buf[w.pos]
		w.pos++
		if shift == 63 && b > 1 {
			return 0, errors.New("varint overflows 64 bits")
		}
		u |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return int64(u>>1) ^ -int64(u&1), nil
		}
	}
	return 0, errors.New("varint longer than 10 bytes")
}

func (w *walker) skip(n int64) error {
	if n < 0 {
		return fmt.Errorf("negative length %d", n)
	}
	if n > int64(w.remaining()) {
		return errShort
	}
	w.pos += int(n)
	return nil
}

// walk checks the bytes of one value of n against n's structure. Long on purpose: one
// case per Avro type, each a few lines, sharing the bounds checks above them.
func (w *walker) walk(n *node, depth int) error {
	if depth > maxNesting {
		return fmt.Errorf("nested deeper than %d", maxNesting)
	}
	switch n.kind {
	case kindNull:
		return nil
	case kindBoolean:
		if w.remaining() < 1 {
			return errShort
		}
		if b := w.buf[w.pos]; b > 1 {
			return fmt.Errorf("boolean byte %#x", b)
		}
		w.pos++
		return nil
	case kindInt:
		v, err := w.varint()
		if err != nil {
			return err
		}
		if v < math.MinInt32 || v > math.MaxInt32 {
			return fmt.Errorf("int %d out of 32-bit range", v)
		}
		return nil
	case kindLong:
		_, err := w.varint()
		return err
	case kindFloat:
		return w.skip(4)
	case kindDouble:
		return w.skip(8)
	case kindBytes, kindString:
		l, err := w.varint()
		if err != nil {
			return err
		}
		return w.skip(l)
	case kindFixed:
		return w.skip(int64(n.size))
	case kindEnum:
		i, err := w.varint()
		if err != nil {
			return err
		}
		if i < 0 || i >= int64(len(n.symbols)) {
			return fmt.Errorf("enum %s index %d out of range", n.name, i)
		}
		return nil
	case kindUnion:
		i, err := w.varint()
		if err != nil {
			return err
		}
		if i < 0 || i >= int64(len(n.branches)) {
			return fmt.Errorf("union index %d out of range", i)
		}
		return w.walk(n.branches[i], depth+1)
	case kindRecord:
		for _, f := range n.fields {
			if err := w.walk(f.typ, depth+1); err != nil {
				return err
			}
		}
		return nil
	case kindArray, kindMap:
		for {
			count, err := w.varint()
			if err != nil {
				return err
			}
			if count == 0 {
				return nil
			}
			if count < 0 {
				if count == math.MinInt64 {
					return errors.New("block count out of range")
				}
				count = -count
				size, err := w.varint()
				if err != nil {
					return err
				}
				if size < 0 || size > int64(w.remaining()) {
					return fmt.Errorf("block size %d exceeds the remaining %d bytes", size, w.remaining())
				}
			}
			// An element takes at least one byte unless its type can be empty; in
			// either case the element total stays bounded.
			if count > int64(w.remaining()) && (n.kind == kindMap || !canBeEmpty(n.items, 0)) {
				return fmt.Errorf("block count %d exceeds the remaining %d bytes", count, w.remaining())
			}
			if count > int64(maxElements-w.elements) {
				return fmt.Errorf("more than %d array or map elements", maxElements)
			}
			w.elements += int(count)
			for range count {
				if n.kind == kindMap {
					if err := w.walk(stringNode, depth+1); err != nil {
						return err
					}
				}
				if err := w.walk(n.items, depth+1); err != nil {
					return err
				}
			}
		}
	default:
		return fmt.Errorf("unsupported type %s", n.kind)
	}
}

// canBeEmpty reports whether a value of type n may encode to zero bytes.
func canBeEmpty(n *node, depth int) bool {
	if depth > maxNesting {
		return false
	}
	switch n.kind {
	case kindNull:
		return true
	case kindFixed:
		return n.size == 0
	case kindRecord:
		for _, f := range n.fields {
			if !canBeEmpty(f.typ, depth+1) {
				return false
			}
		}
		return true
	default:
		return false
	}
}
