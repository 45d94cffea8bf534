package windows

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/kafka"
)

// The publisher emits closed records from the group table's changelog, never from
// a callback. Goka writes a callback's table value to local storage first and to the
// changelog asynchronously, independently of its emits: a record emitted by the
// callback that marked its window closing could reach the closed-window topic while
// the write that froze the window's fields is lost in a crash, and the window would
// then be closed again from other state, with another record. A window's closing
// fields in the changelog, by contrast, are written once: a lost write is never in
// the changelog, a written one is never replaced (a later value of the chat only
// keeps them or drops the window once it is read back). Every record the publisher
// builds from the changelog is therefore byte-identical to every other copy.
//
// A close callback marks its write with the header HeaderAnnounce (the starts of the
// windows it closed or re-announces); other writes carry no header and are skipped
// without decoding. The publisher reads the changelog in its own consumer group,
// produces the records of each poll, waits for their acknowledgement and only then
// commits: at least once, in changelog order (so oldest first per chat), duplicates
// identical. A write compacted away before the publisher read it is announced again
// by the scan (Options.ReemitAfter), as is one whose record was lost.

// HeaderAnnounce is the table-write header that lists the windows (their starts,
// varint unix ms) whose closed records the publisher emits from this value.
const HeaderAnnounce = "larkline-announce"

func encodeStarts(starts []int64) []byte {
	b := make([]byte, 0, 6*len(starts))
	for _, s := range starts {
		b = binary.AppendVarint(b, s)
	}
	return b
}

func decodeStarts(b []byte) ([]int64, error) {
	var out []int64
	for len(b) > 0 {
		v, n := binary.Varint(b)
		if n <= 0 || len(out) >= maxStateItems {
			return nil, fmt.Errorf("%w: announce header", ErrStateFormat)
		}
		out = append(out, v)
		b = b[n:]
	}
	return out, nil
}

// PublisherGroup is the consumer group of a processor version's publisher.
func PublisherGroup(prefix, version string) string {
	return string(GroupName(prefix, version)) + "-publisher"
}

// publisherRetry bounds the backoff between failed produce or commit rounds.
const (
	publisherRetryMin = 200 * time.Millisecond
	publisherRetryMax = 10 * time.Second
)

// runPublisher consumes the changelog until ctx ends. It returns nil when ctx ended,
// or an error when its client cannot be made.
func (p *Processor) runPublisher(ctx context.Context) error {
	table := string(GroupName(p.opts.GroupPrefix, p.opts.ProcessorVersion)) + "-table"
	gopts, err := kafka.GroupConsumerOptions(kafka.GroupConsumer{
		Group: PublisherGroup(p.opts.GroupPrefix, p.opts.ProcessorVersion), Topics: []string{table},
	})
	if err != nil {
		return fmt.Errorf("windows: publisher: %w", err)
	}
	own := newOwnership()
	gopts = append(gopts, kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.assigned(m[table]) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.revoked(m[table]) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.revoked(m[table]) }))
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, p.opts.Client...), gopts...)...)
	if err != nil {
		return fmt.Errorf("windows: publisher client: %w", err)
	}
	defer func() {
		// A poll blocks rebalances (BlockRebalanceOnPoll) until allowed, leaving too:
		// nothing polled is uncommitted here, so allow before leaving.
		cl.AllowRebalance()
		lctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = cl.LeaveGroupContext(lctx)
		cl.Close()
	}()
	wait := publisherRetryMin
	pub := &publishing{cl: cl, own: own, m: p.m, log: p.log}
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		failed := false
		fs.EachError(func(t string, part int32, err error) {
			failed = true
			p.log.Warn("publisher fetch failed; retrying", "topic", t, "partition", part, "err", err)
		})
		if failed && fs.NumRecords() == 0 {
			// a fetch error franz-go does not retry itself (authorization, say): back off
			p.m.publishFailures.Inc()
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			wait = min(2*wait, publisherRetryMax)
			cl.AllowRebalance()
			continue
		}
		var rd round
		fs.EachRecord(func(r *kgo.Record) {
			rd.add(r, p.announced(r))
		})
		pub.publish(ctx, &rd, publisherRetryMin)
		cl.AllowRebalance()
	}
	return nil
}

// roundClient is what publishing needs of the publisher's franz-go client.
type roundClient interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
	CommitRecords(ctx context.Context, rs ...*kgo.Record) error
	AllowRebalance()
}

// ownership tracks the changelog partitions the publisher's member holds.
type ownership struct {
	mu   sync.Mutex
	gone map[int32]bool // revoked or lost since the last assignment of the partition
}

func newOwnership() *ownership { return &ownership{gone: map[int32]bool{}} }

func (o *ownership) assigned(ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps {
		delete(o.gone, p)
	}
}

func (o *ownership) revoked(ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps {
		o.gone[p] = true
	}
}

func (o *ownership) owns(p int32) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return !o.gone[p]
}

// round is one poll's changelog records and the closed records they announce, each
// with the changelog partition it came from.
type round struct {
	recs []*kgo.Record
	out  []*kgo.Record
	from []int32 // changelog partition of out[i]
}

func (r *round) add(rec *kgo.Record, out []*kgo.Record) {
	r.recs = append(r.recs, rec)
	for _, o := range out {
		r.out = append(r.out, o)
		r.from = append(r.from, rec.Partition)
	}
}

// keep drops the records of partitions the member no longer holds: their next owner
// reads them again from the last commit.
func (r *round) keep(own *ownership) {
	recs := r.recs[:0]
	for _, rec := range r.recs {
		if own.owns(rec.Partition) {
			recs = append(recs, rec)
		}
	}
	r.recs = recs
	out, from := r.out[:0], r.from[:0]
	for i, o := range r.out {
		if own.owns(r.from[i]) {
			out, from = append(out, o), append(from, r.from[i])
		}
	}
	r.out, r.from = out, from
}

// publisherCommitAttempts bounds the commits of one round. A round's records are
// produced by then; a commit that still fails leaves them to be read again (one more
// byte-identical copy each) by whoever holds the partition next, or committed with
// the next round's.
const publisherCommitAttempts = 5

// publishing produces and commits rounds.
type publishing struct {
	cl  roundClient
	own *ownership
	m   *metrics
	log *slog.Logger
}

// publish produces the round's closed records, retrying until they are acknowledged
// (between attempts the member may rebalance, so a slow broker cannot get it evicted
// from the group; the records of partitions it lost meanwhile are dropped, their next
// owner emits them), then commits the changelog records, a bounded number of times and
// never producing again: a commit refused because the member lost the group
// (rebalanced while retrying) ends the round. So a lost membership costs at most one
// more copy of a round's records, never an endless loop of them, and never a stall.
func (pb *publishing) publish(ctx context.Context, r *round, backoff time.Duration) {
	wait := backoff
	pause := func() {
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, publisherRetryMax)
	}
	for ctx.Err() == nil {
		r.keep(pb.own)
		if len(r.out) == 0 {
			break
		}
		err := pb.cl.ProduceSync(ctx, r.out...).FirstErr()
		if err == nil {
			for _, o := range r.out {
				pb.m.closed.WithLabelValues(string(o.Headers[1].Value)).Inc()
				pb.m.closedBytes.Observe(float64(len(o.Key) + len(o.Value)))
			}
			break
		}
		pb.m.publishFailures.Inc()
		pb.log.Warn("producing closed records failed; retrying", "records", len(r.out), "err", err)
		pause()
		pb.cl.AllowRebalance() // a rebalance due meanwhile happens here, not by eviction
	}
	for attempt := 1; ctx.Err() == nil; attempt++ {
		r.keep(pb.own)
		if len(r.recs) == 0 {
			return
		}
		err := pb.cl.CommitRecords(ctx, r.recs...)
		if err == nil {
			return
		}
		pb.m.publishFailures.Inc()
		if lostGroup(err) || attempt >= publisherCommitAttempts {
			pb.log.Warn("committing the publisher's changelog offsets failed; left to the partition's next read",
				"records", len(r.recs), "attempts", attempt, "err", err)
			return
		}
		pb.log.Warn("committing the publisher's changelog offsets failed; retrying", "err", err)
		pause()
	}
}

// lostGroup reports whether a commit was refused because the member is no longer in
// the group's current generation.
func lostGroup(err error) bool {
	return errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.UnknownMemberID) ||
		errors.Is(err, kerr.RebalanceInProgress) || errors.Is(err, kerr.FencedInstanceID)
}

// announced builds the closed records one changelog record announces.
func (p *Processor) announced(r *kgo.Record) []*kgo.Record {
	var hdr []byte
	found := false
	for _, h := range r.Headers {
		if h.Key == HeaderAnnounce {
			hdr, found = h.Value, true
		}
	}
	if !found || r.Value == nil {
		return nil
	}
	starts, err := decodeStarts(hdr)
	var c *chatValue
	if err == nil {
		c, err = decodeChat(r.Value)
	}
	if err != nil {
		// Our own write does not decode: a bug. The window is announced again by the
		// scan once the state is fixed; nothing is emitted from bytes we cannot read.
		p.m.publishFailures.Inc()
		p.log.Error("changelog value does not decode; not published", "chat_key", string(r.Key),
			"partition", r.Partition, "offset", r.Offset, "err", err)
		return nil
	}
	var out []*kgo.Record
	for _, s := range starts {
		i, ok := c.find(s)
		if !ok || c.Open[i].Status != statusClosing {
			continue
		}
		w := &c.Open[i]
		rec, err := p.mach.record(string(r.Key), r.Partition, w)
		var b []byte
		if err == nil {
			cctx, cancel := context.WithTimeout(context.Background(), decodeTimeout)
			b, err = p.opts.Codecs.ClosedWindow.Encode(cctx, rec)
			cancel()
		}
		if err != nil {
			p.m.publishFailures.Inc()
			p.log.Error("closed record not built; announced again by the scan", "chat_key", string(r.Key),
				"window_start", msTime(s), "err", err)
			continue
		}
		p.m.closedEvidence.Observe(float64(w.Versions))
		p.log.Debug("window closed", "chat_key", string(r.Key), "window_start", msTime(s),
			"versions", w.Versions, "evidence_end_offset", w.High+1, "oversized", w.Oversized)
		out = append(out, &kgo.Record{
			Topic: p.opts.ClosedTopic, Key: r.Key, Value: b,
			Headers: []kgo.RecordHeader{
				{Key: HeaderProcessorVersion, Value: []byte(p.opts.ProcessorVersion)},
				{Key: "larkline-close-reason", Value: []byte(rec.Reason)},
			},
		})
	}
	return out
}
