package main

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	lt "github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/schemas/ids"
)

var (
	// start is 14:00 UTC, the first beat's reference; the alert fired at 13:52.
	start     = time.Date(2025, 6, 12, 14, 0, 0, 0, time.UTC)
	wsCreated = time.Date(2025, 6, 12, 13, 57, 41, 0, time.UTC)
)

const fillerCount = 180

// person is one member of the chat, active between minutes from and to.
type person struct {
	key, name, enName string
	zh                bool
	from, to          int
	openID, unionID   string
	userID            string
}

// plan is one message of the story (or of the chatter).
type plan struct {
	off      time.Duration
	who      string // person key, or "bot"
	kind     string // text, post, image, file, card, sticker
	handle   string
	text     string
	title    string
	rows     [][]lt.Elem
	fileName string
	mentions []string
	replyTo  *string // handle quoted ("" = the previous beat by someone else)
	thread   string  // handle of the thread root
	parentH  string  // handle of the parent inside the thread (default: the root)
	delivery lt.Delivery
	filler   bool

	id       ids.MessageID
	at       time.Time
	root     *plan
	parent   *plan
	threadID string
}

type editPlan struct {
	at     time.Duration
	handle string
	text   string
	title  string
	paras  [][]lt.Elem
	rows   [][]lt.Elem
}

type recallPlan struct {
	at     time.Duration
	handle string
}

func at(min, sec int) time.Duration {
	return time.Duration(min)*time.Minute + time.Duration(sec)*time.Second
}

func row(e ...lt.Elem) []lt.Elem { return e }

func text(min, sec int, who, s string) *plan {
	return &plan{off: at(min, sec), who: who, kind: "text", text: s}
}

func post(min, sec int, who, title string, rows ...[]lt.Elem) *plan {
	return &plan{off: at(min, sec), who: who, kind: "post", title: title, rows: rows}
}

func card(min, sec int, handle, title string, rows ...[]lt.Elem) *plan {
	return &plan{off: at(min, sec), who: "bot", kind: "card", handle: handle, title: title, rows: rows}
}

func image(min, sec int, who string) *plan {
	return &plan{off: at(min, sec), who: who, kind: "image"}
}

func file(min, sec int, who, name string) *plan {
	return &plan{off: at(min, sec), who: who, kind: "file", fileName: name}
}

func (p *plan) as(h string) *plan            { p.handle = h; return p }
func (p *plan) in(root string) *plan         { p.thread = root; return p }
func (p *plan) under(h string) *plan         { p.parentH = h; return p }
func (p *plan) reply(h string) *plan         { p.replyTo = &h; return p }
func (p *plan) mention(keys ...string) *plan { p.mentions = keys; return p }
func (p *plan) deliver(d lt.Delivery) *plan  { p.delivery = d; return p }

// gen holds the generator's random source.
type gen struct{ r *rand.Rand }

func (g gen) hex(n int) string {
	b := make([]byte, (n+1)/2)
	for i := range b {
		b[i] = byte(g.r.UintN(256))
	}
	return hex.EncodeToString(b)[:n]
}

// key is a Lark resource key: <prefix><uuid with a trailing letter>.
func (g gen) key(prefix string) string {
	return fmt.Sprintf("%s%s-%s-%s-%s-%sg", prefix, g.hex(8), g.hex(4), g.hex(4), g.hex(4), g.hex(11))
}

func (g gen) pick(pool []string) string { return pool[g.r.IntN(len(pool))] }

// fresh picks from pool, avoiding texts used among the last few chatter
// messages (generated in random time order, so this only thins repeats).
func (g gen) fresh(pool []string, recent map[string]int) string {
	n := 0
	for _, i := range recent {
		n = max(n, i+1)
	}
	for range 8 {
		s := g.pick(pool)
		if i, ok := recent[s]; !ok || n-i > 12 {
			return s
		}
	}
	return g.pick(pool)
}

// build makes the scenario of seed. Long on purpose: the steps share the
// generator's random stream, whose order fixes the output for a seed; splitting them
// would make that order implicit.
func build(seed uint64) (*lt.Scenario, error) {
	g := gen{rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	app := lt.App{AppID: "cli_" + g.hex(16), BotOpenID: "ou_" + g.hex(32), Name: "Ticket Manager"}
	tenant := g.hex(16)
	verificationToken := g.hex(32)
	chat := ids.ChatID("oc_" + g.hex(32))
	ppl := map[string]*person{}
	for i := range people {
		p := people[i]
		p.openID, p.unionID, p.userID = "ou_"+g.hex(32), "on_"+g.hex(32), g.hex(8)
		ppl[p.key] = &p
	}
	sc, err := lt.NewScenario(app)
	if err != nil {
		return nil, err
	}
	if err := sc.AddWorkspace(lt.Workspace{ID: wsID, Type: "incident", Status: "firing", CreatedAt: wsCreated}); err != nil {
		return nil, err
	}
	if err := sc.AddBinding(wsID, chat); err != nil {
		return nil, err
	}
	for _, p := range people {
		q := ppl[p.key]
		if err := sc.AddUser(lt.User{OpenID: q.openID, Name: q.name, EnName: q.enName, UnionID: q.unionID, UserID: q.userID}); err != nil {
			return nil, err
		}
	}

	story, edits, recalls := beats()
	byHandle := map[string]*plan{}
	var prevBeat []*plan
	for _, p := range story {
		if p.handle != "" {
			byHandle[p.handle] = p
		}
		if p.replyTo != nil {
			if *p.replyTo == "" {
				// quote the latest beat by someone else
				for i := len(prevBeat) - 1; i >= 0; i-- {
					if prevBeat[i].who != p.who && prevBeat[i].thread == "" {
						p.root, p.parent = prevBeat[i], prevBeat[i]
						break
					}
				}
			} else {
				p.root, p.parent = byHandle[*p.replyTo], byHandle[*p.replyTo]
			}
			if p.root == nil {
				return nil, fmt.Errorf("beat at %s quotes unknown %q", p.off, *p.replyTo)
			}
		}
		if p.thread != "" {
			p.root = byHandle[p.thread]
			p.parent = p.root
			if p.parentH != "" {
				p.parent = byHandle[p.parentH]
			}
			if p.root == nil || p.parent == nil {
				return nil, fmt.Errorf("beat at %s is in unknown thread %q", p.off, p.thread)
			}
		}
		prevBeat = append(prevBeat, p)
	}
	all := append(slices.Clone(story), chatter(g, story)...)
	for _, p := range all {
		p.at = start.Add(p.off).Add(time.Duration(g.r.IntN(1000)) * time.Millisecond)
		if p.delivery == "" {
			p.delivery = lt.DeliverOnce
		}
	}
	slices.SortStableFunc(all, func(a, b *plan) int { return a.at.Compare(b.at) })
	threads := map[*plan]string{}
	for _, p := range all {
		p.id = ids.MessageID("om_" + g.hex(32))
		if p.thread != "" {
			if threads[p.root] == "" {
				threads[p.root] = "omt_" + g.hex(12)
			}
			p.threadID = threads[p.root]
		}
	}

	// The file: messages, edits and the recall in time order.
	type item struct {
		at  time.Time
		add func() error
		p   *plan
	}
	b := lt.Builder{AppID: app.AppID, TenantKey: tenant, Token: verificationToken}
	var items []item
	for _, p := range all {
		env, err := envelope(g, b, p, ppl, app, chat)
		if err != nil {
			return nil, err
		}
		items = append(items, item{at: p.at, p: p, add: func() error { return sc.AddEvent(p.delivery, env) }})
	}
	for _, e := range edits {
		p := byHandle[e.handle]
		if p == nil {
			return nil, fmt.Errorf("edit of unknown %q", e.handle)
		}
		content, err := editContent(p, e)
		if err != nil {
			return nil, err
		}
		when := start.Add(e.at).Add(time.Duration(g.r.IntN(1000)) * time.Millisecond)
		items = append(items, item{at: when, add: func() error {
			return sc.AddEdit(lt.Edit{MessageID: p.id, UpdateTime: when, Content: content})
		}})
	}
	for _, rc := range recalls {
		p := byHandle[rc.handle]
		if p == nil {
			return nil, fmt.Errorf("recall of unknown %q", rc.handle)
		}
		when := start.Add(rc.at).Add(time.Duration(g.r.IntN(1000)) * time.Millisecond)
		env := b.Recall(p.id, chat, when, lt.RecallByOwner)
		items = append(items, item{at: when, add: func() error { return sc.AddEvent(lt.DeliverOnce, env) }})
	}
	slices.SortStableFunc(items, func(a, b item) int { return a.at.Compare(b.at) })
	// Lark does not promise ordered pushes: two adjacent chatter messages
	// after the first half hour are pushed in swapped order.
	for i := 1; i < len(items); i++ {
		a, c := items[i-1].p, items[i].p
		if a != nil && c != nil && a.filler && c.filler && a.root == nil && c.root == nil && a.off > 30*time.Minute {
			items[i-1], items[i] = items[i], items[i-1]
			break
		}
	}
	for _, it := range items {
		if err := it.add(); err != nil {
			return nil, err
		}
	}
	return sc, nil
}

// envelope builds the receive event of p.
func envelope(g gen, b lt.Builder, p *plan, ppl map[string]*person, app lt.App, chat ids.ChatID) (lt.Envelope, error) {
	m := lt.Msg{
		ID: p.id, Chat: chat, At: p.at, ThreadID: p.threadID,
		Delay: time.Duration(80+g.r.IntN(520)) * time.Millisecond,
	}
	if p.who == "bot" {
		m.From = lt.Author{OpenID: app.BotOpenID, Type: lt.SenderTypeBot}
	} else {
		q := ppl[p.who]
		if q == nil {
			return lt.Envelope{}, fmt.Errorf("unknown person %q", p.who)
		}
		m.From = lt.Author{OpenID: q.openID, UnionID: q.unionID, UserID: q.userID}
	}
	if p.root != nil {
		m.RootID, m.ParentID = p.root.id, p.parent.id
	}
	for i, k := range p.mentions {
		q := ppl[k]
		if q == nil {
			return lt.Envelope{}, fmt.Errorf("mention of unknown person %q", k)
		}
		m.Mentions = append(m.Mentions, lt.Mention{Key: fmt.Sprintf("@_user_%d", i+1), OpenID: q.openID, UnionID: q.unionID, UserID: q.userID, Name: q.name})
	}
	switch p.kind {
	case "text":
		return b.Text(m, p.text), nil
	case "post":
		return b.Post(m, p.title, p.rows...), nil
	case "card":
		return b.Card(m, p.title, p.rows...), nil
	case "image":
		return b.Image(m, g.key("img_v3_02"+g.hex(2)+"_")), nil
	case "file":
		return b.File(m, g.key("file_v3_00"+g.hex(2)+"_"), p.fileName), nil
	case "sticker":
		return b.Message(m, "sticker", map[string]string{"file_key": g.key("file_v3_00" + g.hex(2) + "_")}), nil
	}
	return lt.Envelope{}, fmt.Errorf("unknown kind %q", p.kind)
}

// editContent is the content JSON of the edited message.
func editContent(p *plan, e editPlan) (string, error) {
	var v any
	switch p.kind {
	case "text":
		v = map[string]string{"text": e.text}
	case "post":
		v = struct {
			Title   string      `json:"title"`
			Content [][]lt.Elem `json:"content"`
		}{e.title, e.paras}
	case "card":
		v = struct {
			Title    string      `json:"title"`
			Elements [][]lt.Elem `json:"elements"`
		}{e.title, e.rows}
	default:
		return "", fmt.Errorf("cannot edit a %s", p.kind)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// chatter makes the acks, pings, links and small talk around the story:
// denser in the first hour, calmer later.
func chatter(g gen, story []*plan) []*plan {
	var out []*plan
	recent := map[string]int{} // chatter text → index of its last use
	for range fillerCount {
		var off time.Duration
		switch x := g.r.Float64(); {
		case x < 0.45:
			off = 90*time.Second + time.Duration(g.r.Int64N(int64(58*time.Minute)))
		case x < 0.75:
			off = 60*time.Minute + time.Duration(g.r.Int64N(int64(60*time.Minute)))
		default:
			off = 120*time.Minute + time.Duration(g.r.Int64N(int64(118*time.Minute)))
		}
		off = off.Truncate(time.Second)
		min := int(off / time.Minute)
		var active []*person
		for i := range people {
			if people[i].from <= min && min < people[i].to {
				active = append(active, &people[i])
			}
		}
		who := active[g.r.IntN(len(active))]
		p := &plan{off: off, who: who.key, kind: "text", filler: true}
		busy := min < 60
		switch x := g.r.Float64(); {
		case x < 0.07:
			p.text = g.fresh(links, recent)
		case x < 0.10:
			p.kind = "sticker"
		case x < 0.14:
			var others []string
			for _, q := range active {
				if q.key != who.key {
					others = append(others, q.key)
				}
			}
			p.text = g.pick(pings)
			p.mentions = []string{others[g.r.IntN(len(others))]}
		case x < 0.26:
			// a quoted ack of the latest substantive beat by someone else
			for i := len(story) - 1; i >= 0; i-- {
				s := story[i]
				if s.off < off && s.who != who.key && s.who != "bot" && s.thread == "" && s.root == nil {
					p.root, p.parent = s, s
					break
				}
			}
			p.text = ack(g, who)
		case x < 0.62:
			p.text = ack(g, who)
		default:
			zh := who.zh && g.r.Float64() < 0.7
			switch {
			case zh && busy:
				p.text = g.fresh(busyZH, recent)
			case zh:
				p.text = g.fresh(calmZH, recent)
			case busy:
				p.text = g.fresh(busyEN, recent)
			default:
				p.text = g.fresh(calmEN, recent)
			}
		}
		recent[p.text] = len(out)
		out = append(out, p)
	}
	slices.SortStableFunc(out, func(a, b *plan) int { return cmp.Compare(a.off, b.off) })
	return out
}

func ack(g gen, who *person) string {
	if who.zh && g.r.Float64() < 0.75 {
		return g.pick(ackZH)
	}
	return g.pick(ackEN)
}
