package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/connectors/lark/bindings"
	"github.com/larkline/larkline/connectors/lark/evidence"
	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// Defaults of Options.
const (
	// DefaultTimeout bounds the handling of one event, Kafka's acknowledgement
	// included, safely below Lark's 3 s.
	DefaultTimeout = 2500 * time.Millisecond
	// DefaultRecallLookupTimeout bounds the get-message call a recall of an unknown
	// message makes.
	DefaultRecallLookupTimeout = time.Second
	// DefaultRecentMessages bounds the in-process index of recently ingested
	// messages that lets a recall be redacted without calling Lark.
	DefaultRecentMessages = 10_000

	// maxTimeout is Lark's callback limit; a larger Timeout could never be answered.
	maxTimeout = 3 * time.Second
)

// MessageLookup fetches one message from Lark's history; *larkapi.Client satisfies
// it. It answers larkapi.ErrMessageNotFound (wrapped) for a message Lark does not serve.
type MessageLookup interface {
	GetMessage(ctx context.Context, id ids.MessageID) (*larkim.Message, error)
}

// Holders finds the workspaces that hold a Lark message (*store.Store): a recall is
// applied in every one of them, whatever their state or bindings (issue #29).
type Holders interface {
	WorkspacesHoldingMessage(ctx context.Context, chat ids.ChatID, msg ids.MessageID) ([]ids.WorkspaceID, error)
}

// Options configure an Ingester.
type Options struct {
	// Normalizer is the shared pure normalizer. Required.
	Normalizer *normalize.Normalizer
	// Resolver maps a chat to its eligible workspaces. Required.
	Resolver evidence.Eligibility
	// Holders finds the workspaces a recall must reach. Required.
	Holders Holders
	// Producer writes evidence. Required.
	Producer evidence.Producer
	// Codec encodes evidence values. Required.
	Codec *schemas.Codec[schemas.EvidenceRecord]
	// Topic is the evidence topic (default schemas.DefaultEvidenceTopic).
	Topic string
	// Names fills ActorDisplayName from a cache; optional.
	Names evidence.Names
	// Messages finds a recalled message the recent index does not hold; optional.
	// Without it such a recall is ignored (reconciliation's refresh redacts it).
	Messages MessageLookup
	// RecentMessages bounds the recent-message index (default DefaultRecentMessages).
	RecentMessages int
	// Timeout bounds the handling of one event (default DefaultTimeout, at most 3 s).
	Timeout time.Duration
	// RecallLookupTimeout bounds one Messages call (default DefaultRecallLookupTimeout).
	RecallLookupTimeout time.Duration
	// Notify, when set, is called once per workspace and chat after their evidence
	// was acknowledged: a best-effort in-process wakeup. It must not block.
	Notify func(ids.WorkspaceID, ids.ChatID)
	// Clock stamps observed_at and record timestamps (default time.Now).
	Clock func() time.Time
	// Logger receives one line per event that was not accepted (ids and hashes only,
	// never text). Nil discards.
	Logger *slog.Logger
	// Registry receives the larkline_lark_event* metrics. Nil: not registered.
	Registry *prometheus.Registry
}

// Ingester is the event path shared by the webhook and the long connection:
// normalize → resolve bindings → one evidence record per eligible workspace →
// produce all and wait for Kafka's acknowledgements. It is safe for concurrent use.
type Ingester struct {
	norm          *normalize.Normalizer
	resolver      evidence.Eligibility
	holders       Holders
	writer        *evidence.Writer
	messages      MessageLookup
	timeout       time.Duration
	lookupTimeout time.Duration
	notify        func(ids.WorkspaceID, ids.ChatID)
	now           func() time.Time
	log           *slog.Logger
	m             *ingestMetrics

	mu     sync.Mutex
	recent *lru[ids.MessageID, recentMessage]
}

// recentMessage is what the recent index remembers of a message: its redacted
// skeleton (identity and structure, no text) and whether it was recalled.
type recentMessage struct {
	msg   normalize.Message // redacted; zero when only a recall is known
	known bool
	// workspaces are those this process wrote the message to (the evidence sink may
	// not have stored it yet).
	workspaces []ids.WorkspaceID
	recalled   bool
	recallAt   time.Time
	chat       ids.ChatID
}

// New validates opts and returns an Ingester.
func New(opts Options) (*Ingester, error) {
	switch {
	case opts.Normalizer == nil:
		return nil, fmt.Errorf("%w: Normalizer is required", ErrInvalidOptions)
	case opts.Resolver == nil:
		return nil, fmt.Errorf("%w: Resolver is required", ErrInvalidOptions)
	case opts.Holders == nil:
		return nil, fmt.Errorf("%w: Holders is required", ErrInvalidOptions)
	}
	opts.Topic = cmp.Or(opts.Topic, schemas.DefaultEvidenceTopic)
	// The evidence writer owns the Producer, Codec and Topic rules.
	w, err := evidence.New(evidence.Options{Producer: opts.Producer, Codec: opts.Codec, Topic: opts.Topic, Names: opts.Names})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	switch {
	case opts.Timeout == 0:
		opts.Timeout = DefaultTimeout
	case opts.Timeout < 0 || opts.Timeout > maxTimeout:
		return nil, fmt.Errorf("%w: Timeout %s outside (0, %s] (Lark's callback limit)", ErrInvalidOptions, opts.Timeout, maxTimeout)
	}
	switch {
	case opts.RecallLookupTimeout == 0:
		opts.RecallLookupTimeout = DefaultRecallLookupTimeout
	case opts.RecallLookupTimeout < 0 || opts.RecallLookupTimeout >= opts.Timeout:
		return nil, fmt.Errorf("%w: RecallLookupTimeout %s must be positive and below Timeout %s", ErrInvalidOptions, opts.RecallLookupTimeout, opts.Timeout)
	}
	switch {
	case opts.RecentMessages == 0:
		opts.RecentMessages = DefaultRecentMessages
	case opts.RecentMessages < 0:
		return nil, fmt.Errorf("%w: RecentMessages %d is negative", ErrInvalidOptions, opts.RecentMessages)
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newIngestMetrics(opts.Registry)
	if err != nil {
		return nil, err
	}
	return &Ingester{
		norm: opts.Normalizer, resolver: opts.Resolver, holders: opts.Holders, writer: w,
		messages: opts.Messages, timeout: opts.Timeout,
		lookupTimeout: opts.RecallLookupTimeout, notify: opts.Notify, now: opts.Clock,
		log: log.With("component", string(ids.StageIngest)), m: m,
		recent: newLRU[ids.MessageID, recentMessage](opts.RecentMessages),
	}, nil
}

// HandleReceive ingests one im.message.receive_v1 event and returns only after Kafka
// acknowledged every record it produced (or the attempt failed). Own-app messages and
// cards are produced as evidence, flagged ineligible for synthesis (design §7.3).
// The webhook and the long connection call it for every message event; call it
// directly to feed events from another transport.
func (g *Ingester) HandleReceive(ctx context.Context, ev *larkim.P2MessageReceiveV1) Result {
	return g.handleReceive(ctx, ev, transportDirect)
}

// HandleRecall turns one im.message.recalled_v1 event into a redacted evidence
// version (no text, deleted, a new hash) for every workspace that holds the message,
// eligible or not, bound or not (issue #29). A recall of a message no workspace holds
// writes nothing; it is remembered so that a late delivery of the message is redacted.
func (g *Ingester) HandleRecall(ctx context.Context, ev *larkim.P2MessageRecalledV1) Result {
	return g.handleRecall(ctx, ev, transportDirect)
}

func (g *Ingester) handleReceive(ctx context.Context, ev *larkim.P2MessageReceiveV1, transport string) Result {
	start := g.now()
	res := g.receive(ctx, ev)
	g.finish(transport, start, res, eventIDOf(ev))
	return res
}

func (g *Ingester) handleRecall(ctx context.Context, ev *larkim.P2MessageRecalledV1, transport string) Result {
	start := g.now()
	res := g.recall(ctx, ev)
	g.finish(transport, start, res, recallEventIDOf(ev))
	return res
}

func (g *Ingester) receive(ctx context.Context, ev *larkim.P2MessageReceiveV1) (res Result) {
	defer g.recoverInto(&res)
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()

	in, err := normalize.FromReceiveEvent(ev)
	if err != nil {
		return normalizeResult(err)
	}
	msg, err := g.norm.Normalize(in)
	if err != nil {
		return normalizeResult(err)
	}
	g.mu.Lock()
	prev, seen := g.recent.get(msg.MessageID)
	g.mu.Unlock()
	if seen && prev.recalled {
		// The recall overtook this delivery: the newest truth is the recall.
		msg = normalize.Redact(msg, prev.recallAt)
	}
	res, written, err := g.resolveAndProduce(ctx, msg, in.Mentions, ReasonOK)
	if err == nil && res.Outcome == OutcomeAccepted {
		g.remember(msg, seen && prev.recalled, prev.recallAt, written)
	}
	return res
}

func (g *Ingester) recall(ctx context.Context, ev *larkim.P2MessageRecalledV1) (res Result) {
	defer g.recoverInto(&res)
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()

	if ev == nil || ev.Event == nil {
		return rejected(normalize.ReasonMalformedEnvelope, fmt.Errorf("%w: recall event without body", normalize.ErrMalformedEnvelope))
	}
	msgID, chat, recallAt, r, ok := parseRecall(ev)
	if !ok {
		return r
	}
	if recallAt.IsZero() {
		recallAt = g.now()
	}
	// Every workspace that holds the message, whatever its eligibility now: the
	// recall must reach all the places the text went. None: nothing to redact, and
	// nothing is written (no Lark API call either).
	held, r, ok := g.holdersOf(ctx, msgID, chat)
	if !ok {
		return r
	}
	if len(held) == 0 {
		g.m.recalls.WithLabelValues("none", "not_held").Inc()
		g.markRecalled(msgID, chat, recallAt)
		return ignored(ReasonRecallUnknownMessage)
	}

	msg, r, ok := g.recalledMessage(ctx, msgID, chat)
	if !ok {
		if r.Outcome == OutcomeIgnored {
			g.markRecalled(msgID, chat, recallAt)
		}
		return r
	}
	msg = normalize.Redact(msg, recallAt)
	res, err := g.produceTo(ctx, msg, nil, held, ReasonRecall)
	if err == nil && res.Outcome == OutcomeAccepted {
		g.remember(msg, true, recallAt, held)
	}
	return res
}

// holdersOf returns the workspaces holding the message: those this process wrote it
// to and those the store holds it in. A recent message of another chat is a
// mismatch.
func (g *Ingester) holdersOf(ctx context.Context, msgID ids.MessageID, chat ids.ChatID) ([]ids.WorkspaceID, Result, bool) {
	g.mu.Lock()
	prev, ok := g.recent.get(msgID)
	g.mu.Unlock()
	if ok && prev.known && prev.msg.ChatID != chat {
		return nil, rejected(ReasonChatMismatch, fmt.Errorf("recall of message %s names chat %s, the message is in %s", msgID, chat, prev.msg.ChatID)), false
	}
	stored, err := g.holders.WorkspacesHoldingMessage(ctx, chat, msgID)
	if err != nil {
		if ctx.Err() != nil {
			return nil, bindingsFailure(ctx, err), false
		}
		return nil, failed(ReasonStoreUnavailable, fmt.Errorf("recall of message %s: %w", msgID, err)), false
	}
	out := append(slices.Clone(prev.workspaces), stored...)
	slices.Sort(out)
	return slices.Compact(out), Result{}, true
}

// parseRecall validates the ids and time of a recall event.
func parseRecall(ev *larkim.P2MessageRecalledV1) (ids.MessageID, ids.ChatID, time.Time, Result, bool) {
	rawMsg, rawChat := deref(ev.Event.MessageId), deref(ev.Event.ChatId)
	if rawMsg == "" || rawChat == "" {
		return "", "", time.Time{}, rejected(normalize.ReasonMissingID, fmt.Errorf("%w: recall event without message_id or chat_id", normalize.ErrMissingID)), false
	}
	msgID, err := ids.ParseMessageID(rawMsg)
	if err != nil {
		return "", "", time.Time{}, rejected(normalize.ReasonInvalidID, fmt.Errorf("%w: recall message_id", normalize.ErrInvalidID)), false
	}
	chat, err := ids.ParseChatID(rawChat)
	if err != nil {
		return "", "", time.Time{}, rejected(normalize.ReasonInvalidID, fmt.Errorf("%w: recall chat_id (message %s)", normalize.ErrInvalidID, msgID)), false
	}
	recallAt, err := normalize.ParseTimestamp(deref(ev.Event.RecallTime))
	if err != nil {
		return "", "", time.Time{}, rejected(normalize.ReasonInvalidTimestamp, fmt.Errorf("recall of message %s: recall_time: %w", msgID, err)), false
	}
	return msgID, chat, recallAt, Result{}, true
}

// recalledMessage finds the message a recall is about: in the recent index, else
// through Lark's get-message API.
func (g *Ingester) recalledMessage(ctx context.Context, msgID ids.MessageID, chat ids.ChatID) (normalize.Message, Result, bool) {
	g.mu.Lock()
	prev, ok := g.recent.get(msgID)
	g.mu.Unlock()
	if ok && prev.known {
		g.m.recalls.WithLabelValues("recent", "found").Inc()
		if prev.msg.ChatID != chat {
			return normalize.Message{}, rejected(ReasonChatMismatch, fmt.Errorf("recall of message %s names chat %s, the message is in %s", msgID, chat, prev.msg.ChatID)), false
		}
		return prev.msg, Result{}, true
	}
	if g.messages == nil {
		g.m.recalls.WithLabelValues("none", "unknown").Inc()
		return normalize.Message{}, ignored(ReasonRecallUnknownMessage), false
	}
	lctx, cancel := context.WithTimeout(ctx, g.lookupTimeout)
	defer cancel()
	item, err := g.messages.GetMessage(lctx, msgID)
	switch {
	case errors.Is(err, larkapi.ErrMessageNotFound):
		g.m.recalls.WithLabelValues("api", "not_found").Inc()
		return normalize.Message{}, ignored(ReasonRecallUnknownMessage), false
	case err != nil && (larkapi.IsRetryable(err) || ctx.Err() != nil):
		g.m.recalls.WithLabelValues("api", "error").Inc()
		return normalize.Message{}, failed(ReasonLarkAPIUnavailable, fmt.Errorf("recall of message %s: %w", msgID, err)), false
	case err != nil:
		g.m.recalls.WithLabelValues("api", "refused").Inc()
		g.log.Warn("lark refused the recalled message", "message_id", msgID, "chat_id", chat, "err", err)
		return normalize.Message{}, ignored(ReasonRecallLookupRefused), false
	}
	g.m.recalls.WithLabelValues("api", "found").Inc()
	in, err := normalize.FromHistoryMessage(item)
	if err != nil {
		return normalize.Message{}, normalizeResult(err), false
	}
	in.Deleted = true // the recall event is authoritative even if history lags
	msg, err := g.norm.Normalize(in)
	if err != nil {
		return normalize.Message{}, normalizeResult(err), false
	}
	if msg.ChatID != chat {
		return normalize.Message{}, rejected(ReasonChatMismatch, fmt.Errorf("recall of message %s names chat %s, Lark says %s", msgID, chat, msg.ChatID)), false
	}
	return msg, Result{}, true
}

// resolveAndProduce stores msg in every eligible workspace of its chat and returns
// them. The error is non-nil exactly when the result is not acknowledged.
func (g *Ingester) resolveAndProduce(ctx context.Context, msg normalize.Message, mentions []normalize.Mention, reason string) (Result, []ids.WorkspaceID, error) {
	res, err := g.resolver.Resolve(ctx, msg.ChatID, msg.CreatedAt)
	if err != nil {
		r := bindingsFailure(ctx, err)
		return r, nil, r.Err
	}
	if len(res.Targets) == 0 {
		return ignored(res.Reason()), nil, nil
	}
	workspaces := make([]ids.WorkspaceID, len(res.Targets))
	for i, t := range res.Targets {
		workspaces[i] = t.Workspace
	}
	r, err := g.produceTo(ctx, msg, mentions, workspaces, reason)
	return r, workspaces, err
}

// produceTo stores msg in workspaces. The error is non-nil exactly when the result is
// not acknowledged.
func (g *Ingester) produceTo(ctx context.Context, msg normalize.Message, mentions []normalize.Mention, workspaces []ids.WorkspaceID, reason string) (Result, error) {
	g.writer.ObserveMentions(mentions)
	recs, err := g.writer.Records(ctx, &msg, workspaces, g.now(), schemas.IngestEvent)
	if err != nil {
		if errors.Is(err, schemas.ErrInvalidRecord) {
			r := rejected(ReasonInvalidRecord, err)
			return r, err
		}
		r := failed(ReasonEncodeFailed, err)
		return r, err
	}
	if err := g.produce(ctx, recs); err != nil {
		r := produceFailure(err, msg.MessageID)
		return r, r.Err
	}
	if !msg.SynthesisEligible {
		g.m.ineligible.WithLabelValues(msg.IneligibleReason).Add(float64(len(recs)))
	}
	if g.notify != nil {
		for _, ws := range workspaces {
			g.notify(ws, msg.ChatID)
			g.m.notify.Inc()
		}
	}
	return accepted(reason, len(recs)), nil
}

// produce writes every record and waits for every acknowledgement, or for ctx
// (evidence.Writer.Produce): records abandoned that way are not acknowledged to Lark,
// which delivers the event again (an identical version).
func (g *Ingester) produce(ctx context.Context, recs []*kgo.Record) error {
	results, err := g.writer.Produce(ctx, recs)
	if errors.Is(err, evidence.ErrAbandoned) {
		g.m.records.WithLabelValues("abandoned").Add(float64(len(recs)))
		return err
	}
	for _, r := range results {
		if r.Err != nil {
			g.m.records.WithLabelValues("failed").Inc()
			continue
		}
		g.m.records.WithLabelValues("acked").Inc()
	}
	return err
}

func bindingsFailure(ctx context.Context, err error) Result {
	switch {
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		return failed(ReasonCanceled, err)
	case errors.Is(err, context.DeadlineExceeded):
		return failed(ReasonTimeout, err)
	case errors.Is(err, bindings.ErrClosed):
		return failed(ReasonShuttingDown, err)
	}
	return failed(ReasonBindingsUnavailable, err)
}

// produceFailure classifies a failed produce. The call only waited on Kafka, so a
// deadline means Kafka did not acknowledge in time: unavailable.
func produceFailure(err error, msgID ids.MessageID) Result {
	err = fmt.Errorf("produce evidence of message %s: %w", msgID, err)
	switch {
	case errors.Is(err, context.Canceled):
		return failed(ReasonCanceled, err)
	case kafka.IsRetryable(err):
		return failed(ReasonKafkaUnavailable, err)
	}
	return failed(ReasonKafkaError, err)
}

// remember records an acknowledged message (as its redacted skeleton) so that a
// later recall needs no Lark call, and an out-of-order redelivery after a recall
// stays redacted.
func (g *Ingester) remember(msg normalize.Message, recalled bool, recallAt time.Time, workspaces []ids.WorkspaceID) {
	skel := normalize.Redact(msg, time.Time{})
	g.mu.Lock()
	defer g.mu.Unlock()
	prev, _ := g.recent.get(msg.MessageID)
	ws := append(slices.Clone(prev.workspaces), workspaces...)
	slices.Sort(ws)
	g.recent.put(msg.MessageID, recentMessage{msg: skel, known: true, recalled: recalled, recallAt: recallAt, chat: msg.ChatID, workspaces: slices.Compact(ws)})
}

// markRecalled remembers a recall whose message is not known, so that a delivery of
// the message arriving after it is redacted.
func (g *Ingester) markRecalled(id ids.MessageID, chat ids.ChatID, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	prev, _ := g.recent.get(id)
	prev.recalled, prev.recallAt, prev.chat = true, at, chat
	g.recent.put(id, prev)
}

// recoverInto turns a panic into a failed result, so that an event is never
// acknowledged by accident and the process keeps serving.
func (g *Ingester) recoverInto(res *Result) {
	if p := recover(); p != nil {
		g.log.Error("panic while handling a lark event", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		*res = failed(ReasonInternal, fmt.Errorf("panic: %v", p))
	}
}

// finish counts and logs one handled event.
func (g *Ingester) finish(transport string, start time.Time, res Result, eventID string) {
	g.m.events.WithLabelValues(string(res.Outcome), res.Reason).Inc()
	g.m.ack.WithLabelValues(transport, string(res.Outcome)).Observe(g.now().Sub(start).Seconds())
	switch res.Outcome {
	case OutcomeFailed:
		g.log.Warn("lark event not acknowledged", "transport", transport, "event_id", eventID,
			"outcome", res.Outcome, "reason", res.Reason, "err", res.Err)
	case OutcomeRejected:
		// Info, not Warn: anyone can post forged requests; the counter is the signal.
		g.log.Info("lark event rejected", "transport", transport, "event_id", eventID,
			"reason", res.Reason, "err", res.Err)
	case OutcomeIgnored:
		g.log.Debug("lark event ignored", "transport", transport, "event_id", eventID, "reason", res.Reason)
	default:
		g.log.Debug("lark event accepted", "transport", transport, "event_id", eventID, "reason", res.Reason, "records", res.Records)
	}
}

func eventIDOf(ev *larkim.P2MessageReceiveV1) string {
	if ev == nil || ev.EventV2Base == nil || ev.EventV2Base.Header == nil {
		return ""
	}
	return boundedID(ev.EventV2Base.Header.EventID)
}

func recallEventIDOf(ev *larkim.P2MessageRecalledV1) string {
	if ev == nil || ev.EventV2Base == nil || ev.EventV2Base.Header == nil {
		return ""
	}
	return boundedID(ev.EventV2Base.Header.EventID)
}

// boundedID keeps an untrusted id loggable: at most 64 bytes of id characters.
func boundedID(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return "(invalid)"
		}
	}
	return s
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
