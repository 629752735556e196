package transport

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// TestAJWTCredsFileConnectsToAServerInOperatorMode: --nats-creds also
// takes the .creds file of a NATS deployment run by an operator.
func TestAJWTCredsFileConnectsToAServerInOperatorMode(t *testing.T) {
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	operator, err := nkeys.CreateOperator()
	must(err)
	opub, err := operator.PublicKey()
	must(err)
	oc := jwt.NewOperatorClaims(opub)
	account, err := nkeys.CreateAccount()
	must(err)
	apub, err := account.PublicKey()
	must(err)
	ajwt, err := jwt.NewAccountClaims(apub).Encode(operator)
	must(err)
	user, err := nkeys.CreateUser()
	must(err)
	upub, err := user.PublicKey()
	must(err)
	ujwt, err := jwt.NewUserClaims(upub).Encode(account)
	must(err)
	seed, err := user.Seed()
	must(err)
	creds, err := jwt.FormatUserConfig(ujwt, seed)
	must(err)
	file := filepath.Join(t.TempDir(), "n1.creds")
	must(os.WriteFile(file, creds, 0o600))

	resolver := &server.MemAccResolver{}
	must(resolver.Store(apub, ajwt))
	o := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true,
		TrustedOperators: []*jwt.OperatorClaims{oc}, AccountResolver: resolver}
	s := runServer(t, o)
	newNode(t, s, "n1", func(c *Config) { c.Auth = Auth{CredsFile: file} })
	if _, err := rawClient(t, s, Auth{}, nil); err == nil {
		t.Fatal("connect without the creds file: got nil error, want a refusal")
	}
}
