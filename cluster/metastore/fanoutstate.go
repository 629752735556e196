package metastore

import (
	"bytes"
	"slices"
	"strconv"

	"github.com/naradmq/narad/messages"
)

// The fan-out part of the metadata state machine: links between a parent
// and its children live on both records, and every command that touches
// one side changes the other in the same entry, so no replica ever sees a
// half-made link.

// fanoutHeadroomMs is how much longer than a delay child's delay the
// parent must keep records (the contract's "retention must be >= delay +
// 1 h"): a record the fan-out copies late must still be there to copy.
const fanoutHeadroomMs = 3_600_000

// maxFanoutDelayMs is the contract's longest delay, one year.
const maxFanoutDelayMs = 31_536_000_000

// refusal is a refused fan-out command: its result code and why.
type refusal struct {
	code   messages.ResultCode
	reason string
}

// AttachRefusal judges attaching child to parent with delayMs, as the
// state machine does: ResultOK and "" when it may apply, else the code and
// the reason a client reads. The API asks it
// against its local replica to word a refusal it cannot learn otherwise
// through the controller; the state machine's answer is the one that
// holds.
func AttachRefusal(parent, child messages.Topic, delayMs int64) (messages.ResultCode, string) {
	r := attachRefusal(parent, child, delayMs)
	return r.code, r.reason
}

func attachRefusal(parent, child messages.Topic, delayMs int64) refusal {
	// An if chain rather than a tagless switch: each condition is then a
	// statement a coverage profile counts, so mutation testing runs it.
	if parent.Name == child.Name {
		return refusal{messages.ResultInvalid, "a topic cannot be its own child"}
	}
	if delayMs < 0 || delayMs > maxFanoutDelayMs {
		return refusal{messages.ResultInvalid, "delay_ms must be between 0 and 31536000000 (1 year)"}
	}
	if child.Parent == parent.Name {
		return refusal{messages.ResultConflict, "child " + child.Name + " is already attached to " + parent.Name}
	}
	if child.Parent != "" {
		return refusal{messages.ResultConflict, "child " + child.Name + " already has parent " + child.Parent}
	}
	if parent.Parent != "" {
		return refusal{messages.ResultConflict, "parent " + parent.Name + " is itself a child of " + parent.Parent + " (no chains)"}
	}
	if len(child.Children) > 0 {
		return refusal{messages.ResultConflict, "child " + child.Name + " is a parent and cannot be a child (no chains)"}
	}
	if len(parent.Children) >= messages.MaxChildren {
		return refusal{messages.ResultConflict, "parent " + parent.Name + " has the limit of " + strconv.Itoa(messages.MaxChildren) + " children"}
	}
	if !schemaFits(parent, child) {
		return refusal{messages.ResultConflict, "schema mismatch: a child with a schema must have its parent's latest schema"}
	}
	if !buffers(parent.RetentionMs, delayMs) {
		return refusal{messages.ResultInvalid, "delay too long for the parent's retention: retention_ms must be 0 or at least delay + 3600000 (1h)"}
	}
	return refusal{code: messages.ResultOK}
}

// schemaFits is the schema rule of an attach: a child without a schema
// takes whatever the parent has; a child with one must have the parent's
// latest, so every record the parent validated validates on the child.
func schemaFits(parent, child messages.Topic) bool {
	if len(child.Schemas) == 0 {
		return true
	}
	if len(parent.Schemas) == 0 {
		return false
	}
	return bytes.Equal(compactSchema(parent.Schemas[len(parent.Schemas)-1]), compactSchema(child.Schemas[len(child.Schemas)-1]))
}

// buffers says whether a parent keeping records retentionMs (0: forever)
// can hold them for a child delayed delayMs.
func buffers(retentionMs, delayMs int64) bool {
	return delayMs == 0 || retentionMs == 0 || retentionMs >= delayMs+fanoutHeadroomMs
}

// AlterRefusal judges an alter of t against its fan-out links, as the
// state machine does: a schema change on an attached child (ResultConflict:
// the parent's records would no longer be checked against it), and a
// retention too short for a delay child's buffering (ResultInvalid).
func AlterRefusal(t messages.Topic, a messages.AlterTopic) (messages.ResultCode, string) {
	if len(a.AddSchema) > 0 && t.Parent != "" {
		return messages.ResultConflict, "the schema of a fan-out child cannot change while it is attached to " + t.Parent
	}
	if a.RetentionMs != nil {
		for _, c := range t.Children {
			if !buffers(*a.RetentionMs, c.DelayMs) {
				return messages.ResultInvalid, "retention too short for delay child " + c.Name + ": retention_ms must be 0 or at least " + strconv.FormatInt(c.DelayMs+fanoutHeadroomMs, 10)
			}
		}
	}
	return messages.ResultOK, ""
}

func (s *metaState) attachChild(a messages.AttachChild, index uint64) messages.MetaResult {
	if a.Parent == a.Child {
		return refused(refusal{messages.ResultInvalid, "a topic cannot be its own child"}, nil)
	}
	p, ok := s.topics[a.Parent]
	if !ok {
		return refused(refusal{messages.ResultNotFound, "parent topic not found"}, nil)
	}
	c, ok := s.topics[a.Child]
	if !ok {
		return refused(refusal{messages.ResultNotFound, "child topic not found"}, &p)
	}
	if r := attachRefusal(p, c, a.DelayMs); r.code != messages.ResultOK {
		return refused(r, &p)
	}
	s.link(&p, &c, a.DelayMs, index)
	return messages.MetaResult{Code: messages.ResultOK, Topic: cloneTopic(&p)}
}

// link makes c a child of p and stores both records.
func (s *metaState) link(p, c *messages.Topic, delayMs int64, index uint64) {
	c.Parent, c.AttachEpoch, c.FanoutDelayMs = p.Name, index, delayMs
	// Clip first: readers may hold a copy sharing the old backing array.
	p.Children = append(slices.Clip(p.Children), messages.ChildLink{Name: c.Name, Incarnation: c.Incarnation, AttachEpoch: index, DelayMs: delayMs})
	s.setTopic(*p)
	s.setTopic(*c)
}

func (s *metaState) detachChild(d messages.DetachChild) messages.MetaResult {
	p, ok := s.topics[d.Parent]
	if !ok {
		return refused(refusal{messages.ResultNotFound, "topic not found"}, nil)
	}
	if !slices.ContainsFunc(p.Children, func(l messages.ChildLink) bool { return l.Name == d.Child }) {
		return refused(refusal{messages.ResultNotFound, "child " + d.Child + " is not attached to " + d.Parent}, &p)
	}
	p = s.unlink(p, d.Child)
	return messages.MetaResult{Code: messages.ResultOK, Topic: cloneTopic(&p)}
}

// unlink removes the link from p to child on both records, stores them and
// returns p after.
func (s *metaState) unlink(p messages.Topic, child string) messages.Topic {
	p.Children = slices.DeleteFunc(slices.Clone(p.Children), func(l messages.ChildLink) bool { return l.Name == child })
	if len(p.Children) == 0 {
		p.Children = nil
	}
	s.setTopic(p)
	if c, ok := s.topics[child]; ok && c.Parent == p.Name {
		c.Parent, c.AttachEpoch, c.FanoutDelayMs = "", 0, 0
		s.setTopic(c)
	}
	return p
}

// unlinkAll removes every link of t, a topic about to be deleted: from
// its parent, or to each of its children.
func (s *metaState) unlinkAll(t messages.Topic) {
	if t.Parent != "" {
		if p, ok := s.topics[t.Parent]; ok {
			s.unlink(p, t.Name)
		}
	}
	for _, l := range t.Children {
		if c, ok := s.topics[l.Name]; ok && c.Parent == t.Name {
			c.Parent, c.AttachEpoch, c.FanoutDelayMs = "", 0, 0
			s.setTopic(c)
		}
	}
}

func refused(r refusal, t *messages.Topic) messages.MetaResult {
	res := messages.MetaResult{Code: r.code, Reason: r.reason}
	if t != nil {
		res.Topic = cloneTopic(t)
	}
	return res
}
