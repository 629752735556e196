package metastore

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/naradmq/narad/messages"
)

func userCmd(c messages.MetaCommand) messages.MetaCommand {
	c.Version = messages.CommandVersion
	return c
}

func createUserCmd(name, hash string, grants ...messages.Grant) messages.MetaCommand {
	return userCmd(messages.MetaCommand{CreateUser: &messages.CreateUser{User: messages.User{
		Username: name, PasswordHash: hash, Grants: grants, CreatedAtMs: 10, UpdatedAtMs: 10}}})
}

var produceOrders = messages.Grant{Action: "produce", Patterns: []string{"orders*"}}

func TestMetaStateUsers(t *testing.T) {
	tests := []struct {
		name      string
		setup     []messages.MetaCommand
		cmd       messages.MetaCommand
		wantCode  messages.ResultCode
		wantUser  *messages.User
		wantUsers []messages.User
	}{
		{
			name:      "create on empty stores the record as given",
			cmd:       createUserCmd("ann", "h1", produceOrders),
			wantCode:  messages.ResultOK,
			wantUser:  &messages.User{Username: "ann", PasswordHash: "h1", Grants: []messages.Grant{produceOrders}, CreatedAtMs: 10, UpdatedAtMs: 10},
			wantUsers: []messages.User{{Username: "ann", PasswordHash: "h1", Grants: []messages.Grant{produceOrders}, CreatedAtMs: 10, UpdatedAtMs: 10}},
		},
		{
			name:      "create of a taken name answers exists with the existing record",
			setup:     []messages.MetaCommand{createUserCmd("ann", "h1")},
			cmd:       createUserCmd("ann", "h2"),
			wantCode:  messages.ResultExists,
			wantUser:  &messages.User{Username: "ann", PasswordHash: "h1", CreatedAtMs: 10, UpdatedAtMs: 10},
			wantUsers: []messages.User{{Username: "ann", PasswordHash: "h1", CreatedAtMs: 10, UpdatedAtMs: 10}},
		},
		{
			name:     "create without a hash is invalid",
			cmd:      createUserCmd("ann", ""),
			wantCode: messages.ResultInvalid,
		},
		{
			name:     "create without a name is invalid",
			cmd:      createUserCmd("", "h1"),
			wantCode: messages.ResultInvalid,
		},
		{
			name:      "users list sorted by name",
			setup:     []messages.MetaCommand{createUserCmd("zed", "h1")},
			cmd:       createUserCmd("bob", "h2"),
			wantCode:  messages.ResultOK,
			wantUser:  &messages.User{Username: "bob", PasswordHash: "h2", CreatedAtMs: 10, UpdatedAtMs: 10},
			wantUsers: []messages.User{{Username: "bob", PasswordHash: "h2", CreatedAtMs: 10, UpdatedAtMs: 10}, {Username: "zed", PasswordHash: "h1", CreatedAtMs: 10, UpdatedAtMs: 10}},
		},
		{
			name:     "delete answers the removed record",
			setup:    []messages.MetaCommand{createUserCmd("ann", "h1")},
			cmd:      userCmd(messages.MetaCommand{DeleteUser: &messages.DeleteUser{Username: "ann"}}),
			wantCode: messages.ResultOK,
			wantUser: &messages.User{Username: "ann", PasswordHash: "h1", CreatedAtMs: 10, UpdatedAtMs: 10},
		},
		{
			name:     "delete of an unknown user is not found",
			cmd:      userCmd(messages.MetaCommand{DeleteUser: &messages.DeleteUser{Username: "ann"}}),
			wantCode: messages.ResultNotFound,
		},
		{
			name:  "set grants replaces them and stamps the update",
			setup: []messages.MetaCommand{createUserCmd("ann", "h1", produceOrders)},
			cmd: userCmd(messages.MetaCommand{SetUserGrants: &messages.SetUserGrants{Username: "ann",
				Grants: []messages.Grant{{Action: "consume", Patterns: []string{"x"}}}, UpdatedAtMs: 20}}),
			wantCode:  messages.ResultOK,
			wantUser:  &messages.User{Username: "ann", PasswordHash: "h1", Grants: []messages.Grant{{Action: "consume", Patterns: []string{"x"}}}, CreatedAtMs: 10, UpdatedAtMs: 20},
			wantUsers: []messages.User{{Username: "ann", PasswordHash: "h1", Grants: []messages.Grant{{Action: "consume", Patterns: []string{"x"}}}, CreatedAtMs: 10, UpdatedAtMs: 20}},
		},
		{
			name:     "set grants of an unknown user is not found",
			cmd:      userCmd(messages.MetaCommand{SetUserGrants: &messages.SetUserGrants{Username: "ann", UpdatedAtMs: 20}}),
			wantCode: messages.ResultNotFound,
		},
		{
			name:      "set password replaces the hash and stamps the update",
			setup:     []messages.MetaCommand{createUserCmd("ann", "h1")},
			cmd:       userCmd(messages.MetaCommand{SetUserPassword: &messages.SetUserPassword{Username: "ann", PasswordHash: "h2", UpdatedAtMs: 30}}),
			wantCode:  messages.ResultOK,
			wantUser:  &messages.User{Username: "ann", PasswordHash: "h2", CreatedAtMs: 10, UpdatedAtMs: 30},
			wantUsers: []messages.User{{Username: "ann", PasswordHash: "h2", CreatedAtMs: 10, UpdatedAtMs: 30}},
		},
		{
			name:      "set password without a hash is invalid and changes nothing",
			setup:     []messages.MetaCommand{createUserCmd("ann", "h1")},
			cmd:       userCmd(messages.MetaCommand{SetUserPassword: &messages.SetUserPassword{Username: "ann", UpdatedAtMs: 30}}),
			wantCode:  messages.ResultInvalid,
			wantUsers: []messages.User{{Username: "ann", PasswordHash: "h1", CreatedAtMs: 10, UpdatedAtMs: 10}},
		},
		{
			name: "a command with a user and a topic command set is invalid",
			cmd: func() messages.MetaCommand {
				c := createUserCmd("ann", "h1")
				c.DeleteTopic = &messages.DeleteTopic{Name: "x"}
				return c
			}(),
			wantCode: messages.ResultInvalid,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newMetaState()
			for i, c := range tc.setup {
				if r := s.apply(c, uint64(i+1)); r.Code != messages.ResultOK {
					t.Fatalf("setup %d: got code %d, want OK", i, r.Code)
				}
			}
			r := s.apply(tc.cmd, uint64(len(tc.setup)+1))
			if r.Code != tc.wantCode {
				t.Fatalf("got code %d, want %d", r.Code, tc.wantCode)
			}
			if !reflect.DeepEqual(r.User, tc.wantUser) {
				t.Errorf("got user %+v, want %+v", r.User, tc.wantUser)
			}
			if got := s.userList(); !reflect.DeepEqual(got, nonNil(tc.wantUsers)) {
				t.Errorf("got users %+v, want %+v", got, tc.wantUsers)
			}
		})
	}
}

func nonNil(us []messages.User) []messages.User {
	if us == nil {
		return []messages.User{}
	}
	return us
}

// A reader's copy of a user must not change the state when it changes.
func TestMetaStateUserReadsDoNotAlias(t *testing.T) {
	s := newMetaState()
	s.apply(createUserCmd("ann", "h1", produceOrders), 1)
	u, _ := s.user("ann")
	u.Grants[0].Patterns[0] = "changed"
	list := s.userList()
	list[0].Grants[0].Action = "admin"
	if got, _ := s.user("ann"); !reflect.DeepEqual(got.Grants, []messages.Grant{produceOrders}) {
		t.Fatalf("got grants %+v after the readers changed their copies, want %+v", got.Grants, []messages.Grant{produceOrders})
	}
}

// A snapshot carries the users; a replica restored from it answers the
// same reads and writes the same bytes.
func TestMetaSnapshotKeepsUsers(t *testing.T) {
	s := newMetaState()
	s.apply(createCmd("orders", 3), 1)
	s.apply(createUserCmd("zed", "h1"), 2)
	s.apply(createUserCmd("ann", "h2", produceOrders), 3)
	var first bytes.Buffer
	if err := s.save(&first); err != nil {
		t.Fatal(err)
	}
	restored, err := loadMetaState(bytes.NewReader(first.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := restored.userList(), s.userList(); !reflect.DeepEqual(got, want) {
		t.Fatalf("got users %+v after restore, want %+v", got, want)
	}
	var second bytes.Buffer
	if err := restored.save(&second); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Fatalf("got snapshot %s after restore, want %s", second.Bytes(), first.Bytes())
	}
	// A user created after the restore goes into its sorted place.
	restored.apply(createUserCmd("bob", "h3"), 4)
	var names []string
	for _, u := range restored.userList() {
		names = append(names, u.Username)
	}
	if want := []string{"ann", "bob", "zed"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("got users %v, want %v", names, want)
	}
}

func TestLoadMetaStateRefusesAUserListedTwice(t *testing.T) {
	snap := `{"format":1,"index":2,"topics":[],"users":[{"username":"ann","password_hash":"h"},{"username":"ann","password_hash":"h"}]}`
	if _, err := loadMetaState(bytes.NewReader([]byte(snap))); err == nil {
		t.Fatal("got no error loading a snapshot that lists a user twice, want one")
	}
}
