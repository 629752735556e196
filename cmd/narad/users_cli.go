package main

// narad users: the /v1/users routes of the API contract (§11), over HTTP
// with the caller's Basic credentials.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/naradmq/narad/cmd/narad/client"
	"github.com/naradmq/narad/messages"
)

const usersUsage = `usage: narad users <command> [flags] [name]

Commands:
  create <name>   create a user (--new-password, --grant ...) and print it as JSON
  list            list every user, one per line
  grant <name>    replace a user's grants with the --grant flags given (none: no grants)
  passwd <name>   change a user's password (--new-password; --current-password for your own)
  delete <name>   delete a user

A grant is action:pattern[,pattern...], or admin: produce:orders*,billing
lets the user produce to billing and every topic whose name starts with
orders. Only root may grant admin; others only grants they hold.

Flags of every command:
  --server URL          broker URL (default $NARAD_SERVER, else ` + defaultServer + `)
  --user NAME           username for HTTP Basic (default $NARAD_USER)
  --password PW         its password (default $NARAD_PASSWORD)
  --context NAME        saved context to connect with (default $NARAD_CONTEXT; narad ctx)
  --timeout DURATION    bound on the request (default 30s)
`

// usersCommandUsage is each users command's own help, above its flags.
var usersCommandUsage = map[string]string{
	"create": "usage: narad users create [flags] <name>\n\nCreates a user (--new-password, --grant ...) and prints it as JSON.\nA grant is action:pattern[,pattern...], or admin.\n\nFlags:\n",
	"list":   "usage: narad users list [flags]\n\nLists every user, one per line.\n\nFlags:\n",
	"grant":  "usage: narad users grant [flags] <name>\n\nReplaces a user's grants with the --grant flags given (none: no grants).\n\nFlags:\n",
	"passwd": "usage: narad users passwd [flags] <name>\n\nChanges a user's password (--new-password; --current-password for your own).\n\nFlags:\n",
	"delete": "usage: narad users delete [flags] <name>\n\nDeletes a user.\n\nFlags:\n",
}

// grantFlags is a repeated --grant.
type grantFlags []messages.Grant

func (g *grantFlags) String() string { return fmt.Sprint(*g) }

func (g *grantFlags) Set(v string) error {
	gr, err := parseGrant(v)
	if err != nil {
		return err
	}
	*g = append(*g, gr)
	return nil
}

// parseGrant reads action:pattern[,pattern...], or admin.
func parseGrant(v string) (messages.Grant, error) {
	action, patterns, found := strings.Cut(v, ":")
	if action == "admin" && !found {
		return messages.Grant{Action: action}, nil
	}
	if !found || patterns == "" {
		return messages.Grant{}, fmt.Errorf("grant %q: want action:pattern[,pattern...] or admin", v)
	}
	return messages.Grant{Action: action, Patterns: strings.Split(patterns, ",")}, nil
}

// runUsers runs `narad users <create|list|grant|passwd|delete> ...`.
func runUsers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usersUsage)
		return errors.New("users: missing command")
	}
	cmd := args[0]
	switch cmd {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usersUsage)
		return flag.ErrHelp
	case "create", "list", "grant", "passwd", "delete":
	default:
		fmt.Fprint(stderr, usersUsage)
		return fmt.Errorf("users: unknown command %q", cmd)
	}
	fs := newCommandFlags("users "+cmd, "", stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usersCommandUsage[cmd])
		fs.PrintDefaults()
	}
	server := serverFlag(fs)
	timeout := fs.Duration("timeout", 30*time.Second, "bound on the request")
	var grants grantFlags
	newPassword, currentPassword := new(string), new(string)
	if cmd == "create" || cmd == "grant" {
		fs.Var(&grants, "grant", "a grant, action:pattern[,pattern...] or admin; repeat for more")
	}
	if cmd == "create" || cmd == "passwd" {
		newPassword = fs.String("new-password", "", "the user's (new) password")
	}
	if cmd == "passwd" {
		currentPassword = fs.String("current-password", "", "your current password, to change your own")
	}
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return err
	}
	want := 1
	if cmd == "list" {
		want = 0
	}
	if len(pos) != want {
		return usageErr(fs, "want %d name(s), got %d arguments", want, len(pos))
	}
	if err := applyContext(fs); err != nil {
		return fmt.Errorf("%s: %w", fs.Name(), err)
	}
	if _, err := client.ParseServer(*server); err != nil {
		return fmt.Errorf("%s: %w", fs.Name(), err)
	}
	user, password := credentials(fs)
	u := usersCaller{base: strings.TrimRight(*server, "/"), user: user, password: password, http: &http.Client{Timeout: *timeout}}
	name := ""
	if want == 1 {
		name = url.PathEscape(pos[0])
	}
	switch cmd {
	case "create":
		if *newPassword == "" {
			return usageErr(fs, "--new-password is required")
		}
		body, err := u.call(ctx, "POST", "/v1/users", messages.CreateUserRequest{Username: pos[0], Password: *newPassword, Grants: grants}, http.StatusCreated)
		if err != nil {
			return fmt.Errorf("%s: %w", fs.Name(), err)
		}
		_, err = stdout.Write(body)
		return err
	case "list":
		body, err := u.call(ctx, "GET", "/v1/users", nil, http.StatusOK)
		if err != nil {
			return fmt.Errorf("%s: %w", fs.Name(), err)
		}
		var users []messages.UserInfo
		if err := json.Unmarshal(body, &users); err != nil {
			return fmt.Errorf("%s: the broker's answer is not a list of users: %w", fs.Name(), err)
		}
		return printUsers(stdout, users)
	case "grant":
		body, err := u.call(ctx, "PUT", "/v1/users/"+name+"/grants", messages.GrantsRequest{Grants: nonNilGrants(grants)}, http.StatusOK)
		if err != nil {
			return fmt.Errorf("%s: %w", fs.Name(), err)
		}
		_, err = stdout.Write(body)
		return err
	case "passwd":
		if *newPassword == "" {
			return usageErr(fs, "--new-password is required")
		}
		_, err := u.call(ctx, "PUT", "/v1/users/"+name+"/password", messages.PasswordRequest{NewPassword: *newPassword, CurrentPassword: *currentPassword}, http.StatusNoContent)
		if err != nil {
			return fmt.Errorf("%s: %w", fs.Name(), err)
		}
		return nil
	default: // delete
		if _, err := u.call(ctx, "DELETE", "/v1/users/"+name, nil, http.StatusNoContent); err != nil {
			return fmt.Errorf("%s: %w", fs.Name(), err)
		}
		return nil
	}
}

// nonNilGrants sends an empty list, never null: the broker reads both as
// no grants, but "grants":[] says it.
func nonNilGrants(g grantFlags) []messages.Grant {
	if g == nil {
		return []messages.Grant{}
	}
	return g
}

func printUsers(w io.Writer, users []messages.UserInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "USERNAME\tROOT\tGRANTS")
	for _, u := range users {
		var gs []string
		for _, g := range u.Grants {
			if len(g.Patterns) == 0 {
				gs = append(gs, g.Action)
				continue
			}
			gs = append(gs, g.Action+":"+strings.Join(g.Patterns, ","))
		}
		fmt.Fprintf(tw, "%s\t%t\t%s\n", u.Username, u.Root, strings.Join(gs, " "))
	}
	return tw.Flush()
}

// usersCaller sends the /v1/users requests.
type usersCaller struct {
	base, user, password string
	http                 *http.Client
}

// call sends v as JSON (none when nil) and returns the body of an answer
// with status want; another status is an error with the broker's text.
func (u usersCaller) call(ctx context.Context, method, path string, v any, want int) ([]byte, error) {
	var rd io.Reader
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.base+path, rd)
	if err != nil {
		return nil, err
	}
	if v != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if u.user != "" {
		req.SetBasicAuth(u.user, u.password)
	}
	resp, err := u.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMessageBytes))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		var e messages.ErrorBody
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return nil, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, e.Error)
		}
		return nil, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return body, nil
}
