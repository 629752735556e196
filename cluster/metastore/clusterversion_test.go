package metastore

import (
	"bytes"
	"testing"

	"github.com/naradmq/narad/messages"
)

func registerReading(id string, replica uint64, reads int) messages.MetaCommand {
	c := putMemberCmd(id, replica, messages.RoleVoter)
	c.PutMember.Member.Reads = reads
	return c
}

func heartbeatReading(id string, reads int) messages.MetaCommand {
	return metaCmd(messages.MetaCommand{Heartbeat: &messages.Heartbeat{ID: id, Reads: reads}})
}

func setVersionCmd(v int) messages.MetaCommand {
	return metaCmd(messages.MetaCommand{SetClusterVersion: &messages.SetClusterVersion{Version: v}})
}

// A new cluster of new binaries starts at the lowest version its members
// read, with no operator's step; an older member among them holds it down.
func TestANewClusterStartsAtTheVersionEveryMemberReads(t *testing.T) {
	s := metaStateAfter(t, []messages.MetaCommand{
		registerReading("n1", 1, messages.ClusterVersionNewest),
		registerReading("n2", 2, messages.ClusterVersionNewest),
		registerReading("n3", 3, messages.ClusterVersionNewest),
	})
	if got := s.clusterVersion; got != messages.ClusterVersionNewest {
		t.Errorf("three new members: got version %d, want %d", got, messages.ClusterVersionNewest)
	}
	s = metaStateAfter(t, []messages.MetaCommand{
		registerReading("n1", 1, messages.ClusterVersionNewest),
		registerReading("n2", 2, 0),
		registerReading("n3", 3, messages.ClusterVersionNewest),
	})
	if got := s.clusterVersion; got != 0 {
		t.Errorf("a member older than cluster versions among them: got version %d, want 0", got)
	}
}

// A cluster that holds data when its members first say what they read (it
// began before cluster versions, and is being upgraded) stays at the base
// until an operator finalizes, and finalizing waits for every member.
func TestAnUpgradedClusterMovesOnlyWhenFinalizedAndEveryMemberReadsIt(t *testing.T) {
	s := metaStateAfter(t, []messages.MetaCommand{
		putMemberCmd("n1", 1, messages.RoleVoter),
		putMemberCmd("n2", 2, messages.RoleVoter),
		createUserCmd("admin", "h"),
		createCmd("orders", 3),
		registerReading("n1", 1, messages.ClusterVersionOrigins),
	})
	if got := s.clusterVersion; got != 0 {
		t.Fatalf("an upgraded member registered: got version %d, want 0 until finalized", got)
	}
	r := s.apply(setVersionCmd(messages.ClusterVersionOrigins), 10)
	if r.Code != messages.ResultRefused || !bytes.Contains([]byte(r.Reason), []byte("n2")) {
		t.Fatalf("finalize while n2 reads nothing: got code %d %q, want refused naming n2", r.Code, r.Reason)
	}
	if r := s.apply(heartbeatReading("n2", messages.ClusterVersionOrigins), 11); r.Code != messages.ResultOK {
		t.Fatalf("heartbeat: got code %d", r.Code)
	}
	if r := s.apply(setVersionCmd(messages.ClusterVersionOrigins), 12); r.Code != messages.ResultOK {
		t.Fatalf("finalize once every member reads it: got code %d %q, want OK", r.Code, r.Reason)
	}
	if got := s.clusterVersion; got != messages.ClusterVersionOrigins {
		t.Errorf("after the finalize: got version %d, want %d", got, messages.ClusterVersionOrigins)
	}
	if r := s.apply(setVersionCmd(messages.ClusterVersionOrigins), 13); r.Code != messages.ResultRefused {
		t.Errorf("the same version again: got code %d, want refused", r.Code)
	}
	if r := s.apply(setVersionCmd(0), 14); r.Code != messages.ResultInvalid {
		t.Errorf("version 0: got code %d, want invalid", r.Code)
	}
	// A member registering again with an older binary (a downgrade) does
	// not move it down: the formats are on disk.
	s.apply(registerReading("n2", 2, 0), 15)
	if got := s.clusterVersion; got != messages.ClusterVersionOrigins {
		t.Errorf("after an older registration: got version %d, want %d kept", got, messages.ClusterVersionOrigins)
	}
	if back := savedAndLoaded(t, s); back.clusterVersion != s.clusterVersion {
		t.Errorf("after a snapshot: got version %d, want %d", back.clusterVersion, s.clusterVersion)
	}
}
