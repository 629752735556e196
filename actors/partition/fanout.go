package partition

import (
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/fanout"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// The partition actor's side of the fan-out (actors/fanout): it owns the
// cursor files (fanout-<child>.offset in its directory, storage/cursor.go),
// anchors a link's cursor when the link first appears, serves the
// committed records past a cursor to its fan-out actor (fanout.Read), and
// moves a cursor on only when told the child committed everything before
// it (fanout.Advance). The fan-out actor, its child, runs the copies.
//
// The cursors move with the partition (rules K6, K8, V7): the source ships
// each cursor file as a sidecar of its listing, the verified record as
// read (cursorSidecars); the destination's move worker (actors/mover, its
// sidecars.go) checks each as the listing arrives and installs them, last,
// into the staged copy, clamped to the installed HWM.

// setLinks anchors every link without a cursor, removes the cursor
// files of links gone from the metadata, and tells the fan-out actor (one
// is spawned for the first link, stopped with the last).
func (p *Actor) setLinks(ctx actor.Context, links []messages.ChildLink) {
	if p.log == nil {
		p.links = links
		return
	}
	p.links = links
	if p.cursors == nil {
		p.cursors = map[string]storage.Cursor{}
	}
	want := make(map[string]messages.ChildLink, len(links))
	for _, l := range links {
		want[l.Name] = l
		if c, ok := p.cursors[l.Name]; ok && c.Epoch == l.AttachEpoch {
			continue
		}
		p.anchor(l)
	}
	for child := range p.cursors {
		if _, ok := want[child]; !ok {
			p.dropCursor(child)
		}
	}
	if !p.swept && len(links) > 0 {
		// Files of links detached while this node was down (a topic with
		// no links left keeps them: harmless, each names an old epoch,
		// and the open of every partition need not read its directory).
		p.swept = true
		if files, err := storage.ListCursors(p.dir, p.deps.Consumer.CursorReadAttempts); err == nil {
			for child := range files {
				if _, ok := want[child]; !ok {
					p.dropCursor(child)
				}
			}
		} else {
			p.deps.Logger.Warn("list fan-out cursors", "partition", p.name, "err", err)
		}
	}
	switch {
	case len(links) == 0 && p.fanout != nil:
		ctx.Stop(p.fanout)
		p.fanout = nil
	case len(links) > 0 && p.fanout == nil:
		d, k := p.deps.Fanout, p.key
		// A prefix, not a name: the child of an earlier life of a
		// restarted partition actor may still be stopping.
		p.fanout = ctx.SpawnPrefix(actor.PropsFromProducer(func() actor.Actor { return fanout.New(d, k) }), "fanout")
	}
	if p.fanout != nil {
		ctx.Send(p.fanout, fanout.Links{Links: links, Cursors: p.cursorOffsets(), HWM: p.log.HWM()})
	}
}

// anchor decides and writes a new link's cursor, durably: a lost anchor
// would be re-decided at a later HWM, skipping what came between.
func (p *Actor) anchor(l messages.ChildLink) {
	var named []storage.ChildLink
	if p.marker != nil {
		named = p.marker.m.Children
	}
	in := fanout.AnchorInput{Epoch: l.AttachEpoch, InMarker: fanout.MarkerNames(named, l.Name, l.AttachEpoch),
		Oldest: p.log.Oldest(), HWM: p.log.HWM()}
	c, err := storage.ReadCursor(p.dir, l.Name, p.deps.Consumer.CursorReadAttempts)
	switch {
	case err == nil:
		in.File, in.Found = c, true
	case errors.Is(err, storage.ErrNotFound):
	default:
		in.Corrupt = true
		p.deps.Logger.Error("fan-out cursor unreadable; copying from the oldest record", "partition", p.name, "child", l.Name, "err", err)
	}
	off, why := fanout.AnchorCursor(in)
	cur := storage.Cursor{Child: l.Name, Epoch: l.AttachEpoch, Offset: off}
	if err := storage.WriteCursor(p.dir, cur, true, p.deps.Consumer.Faults); err != nil {
		// The memory cursor still serves; the next advance writes again.
		p.deps.Logger.Error("write fan-out cursor", "partition", p.name, "child", l.Name, "err", err)
	}
	p.cursors[l.Name] = cur
	switch why {
	case fanout.AnchorMarker:
		p.deps.Logger.Warn("fan-out cursor missing for a link the move marker names; copying from the oldest record (rule K9)",
			"partition", p.name, "child", l.Name, "offset", off)
	case fanout.AnchorTail:
		p.deps.Logger.Info("fan-out link anchored at the log end", "partition", p.name, "child", l.Name, "offset", off)
	}
}

func (p *Actor) dropCursor(child string) {
	delete(p.cursors, child)
	if err := storage.RemoveCursor(p.dir, child); err != nil {
		p.deps.Logger.Error("remove fan-out cursor", "partition", p.name, "child", child, "err", err)
	}
	p.deps.Fanout.Metrics.Lags.Forget(p.key, child)
}

func (p *Actor) cursorOffsets() map[string]int64 {
	if len(p.cursors) == 0 {
		return nil
	}
	out := make(map[string]int64, len(p.cursors))
	for child, c := range p.cursors {
		out[child] = c.Offset
	}
	return out
}

// fanoutRead serves committed records past a cursor: never past the HWM
// (a copy must not expose records the parent has not made visible).
func (p *Actor) fanoutRead(ctx actor.Context, m *fanout.Read) {
	out := fanout.Records{Child: m.Child, Epoch: m.Epoch, From: m.From}
	if p.log == nil {
		out.Err = errors.New("partition not open")
		ctx.Respond(out)
		return
	}
	out.HWM, out.Oldest = p.log.HWM(), p.log.Oldest()
	switch {
	case m.From < out.Oldest:
		out.Gone = true
	case m.From < out.HWM:
		n := min(int64(m.Max), out.HWM-m.From)
		recs, err := p.log.Read(m.From, int(n), m.Bytes)
		if errors.Is(err, storage.ErrOutOfRange) {
			out.Gone = true
		} else if err != nil {
			out.Err = err
		}
		for _, r := range recs {
			if r.Offset >= out.HWM {
				panic(fmt.Sprintf("partition %s: fan-out read offset %d at or past the HWM %d", p.name, r.Offset, out.HWM))
			}
		}
		out.Recs = recs
	}
	ctx.Respond(out)
}

// fanoutAdvance moves a cursor once the child committed what lies before
// it. The file is overwritten without a sync: a crash that loses the write
// copies those records again (at-least-once), never skips them.
func (p *Actor) fanoutAdvance(m fanout.Advance) {
	c, ok := p.cursors[m.Child]
	if !ok || c.Epoch != m.Epoch || m.Offset <= c.Offset {
		return // detached, re-attached, or an old answer
	}
	c.Offset = m.Offset
	p.cursors[m.Child] = c
	if p.log == nil {
		return
	}
	if err := storage.WriteCursor(p.dir, c, false, p.deps.Consumer.Faults); err != nil {
		p.deps.Logger.Error("write fan-out cursor", "partition", p.name, "child", m.Child, "err", err)
	}
}

// cursorSidecars reads the partition's cursor files for a listing (rule
// K8): a record caught mid-write is read again, and one that never
// verifies fails the listing, so no unverified record is ever shipped.
func (p *Actor) cursorSidecars() ([][]byte, error) {
	raws, err := storage.ListCursorFiles(p.dir, p.deps.Consumer.CursorReadAttempts)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", keyString(p.key), err)
	}
	return raws, nil
}

// helloFanout answers a (re)started fan-out actor with the links.
func (p *Actor) helloFanout(ctx actor.Context) {
	if p.fanout != nil && p.log != nil {
		ctx.Send(p.fanout, fanout.Links{Links: p.links, Cursors: p.cursorOffsets(), HWM: p.log.HWM()})
	}
}

// wakeFanout tells the fan-out actor that records became visible.
func (p *Actor) wakeFanout(ctx actor.Context) {
	if p.fanout != nil && p.log != nil {
		ctx.Send(p.fanout, fanout.Wake{HWM: p.log.HWM()})
	}
}
