package actors

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/naradmq/narad/messages"
)

// recordFrameKinds counts the record frames of every segment under dir by
// the kind byte on disk: 1 without an origin, 3 with one.
func recordFrameKinds(t *testing.T, dir string) map[byte]int {
	t.Helper()
	kinds := map[byte]int{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".log") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for len(b) >= 9 {
			n := int(binary.BigEndian.Uint32(b[0:4])) + 4
			if n < 9 || n > len(b) {
				break
			}
			if k := b[8]; k != 2 { // 2 is a commit frame
				kinds[k]++
			}
			b = b[n:]
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) { // none yet: partitions open at their first commit
		t.Fatal(err)
	}
	return kinds
}

func (tn *testNode) clusterVersion() messages.ClusterVersionInfo {
	tn.t.Helper()
	var v messages.ClusterVersionInfo
	if err := json.Unmarshal(tn.must(http.StatusOK, "GET", "/v1/cluster/version", nil), &v); err != nil {
		tn.t.Fatal(err)
	}
	return v
}

// A cluster with a member of a binary older than cluster versions writes
// records without their origin, which that member reads; the finalize is
// refused while the member is there, and once it is gone the version
// moves and records carry their origin again.
func TestRecordsCarryTheirOriginOnlyOnceEveryMemberReadsThem(t *testing.T) {
	tn := newTestNode(t)
	if got := tn.clusterVersion().Version; got != messages.ClusterVersionNewest {
		t.Fatalf("a new cluster of this binary: got version %d, want %d", got, messages.ClusterVersionNewest)
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterWaitBound)
	defer cancel()
	// An old member, registered while the cluster holds nothing, then
	// dead so that nothing is placed on it.
	if _, err := tn.n.store.PutMember(ctx, messages.Member{ID: "n9", ReplicaID: 99, Role: messages.RoleNonVoter}); err != nil {
		t.Fatal(err)
	}
	if _, err := tn.n.store.SetMemberStatus(ctx, "n9", messages.MemberDead, ""); err != nil {
		t.Fatal(err)
	}
	if v := tn.clusterVersion(); v.Version != messages.ClusterVersionBase || v.Finalizable != 0 {
		t.Fatalf("with the old member: got version %d finalizable %d, want %d and 0", v.Version, v.Finalizable, messages.ClusterVersionBase)
	}
	tn.createTopic("up", 3)
	tn.must(http.StatusAccepted, "POST", "/v1/topics/up/produce?partition=0", []byte("before"))
	topics := filepath.Join(tn.cfg.DataDir, "topics")
	waitFor(t, func() bool { k := recordFrameKinds(t, topics); return k[1]+k[3] == 1 })
	if got := recordFrameKinds(t, topics); got[1] != 1 || got[3] != 0 {
		t.Fatalf("frames before the finalize: got %v, want one of kind 1 and none of kind 3", got)
	}

	code, body := tn.do("POST", "/v1/cluster/version", []byte(`{"version":2}`))
	if code != http.StatusConflict || !strings.Contains(string(body), "n9") {
		t.Fatalf("finalize with the old member: got %d %s, want 409 naming n9", code, body)
	}
	if _, err := tn.n.store.RemoveMember(ctx, "n9"); err != nil {
		t.Fatal(err)
	}
	var v messages.ClusterVersionInfo
	if err := json.Unmarshal(tn.must(http.StatusOK, "POST", "/v1/cluster/version", []byte(`{"version":2}`)), &v); err != nil || v.Version != 2 {
		t.Fatalf("finalize without it: got %+v, %v, want version 2", v, err)
	}
	tn.must(http.StatusAccepted, "POST", "/v1/topics/up/produce?partition=0", []byte("after"))
	waitFor(t, func() bool { k := recordFrameKinds(t, topics); return k[1]+k[3] == 2 })
	if got := recordFrameKinds(t, topics); got[1] != 1 || got[3] != 1 {
		t.Errorf("frames after the finalize: got %v, want the first still kind 1 and the second kind 3", got)
	}
}
