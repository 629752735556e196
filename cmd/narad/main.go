// Command narad is the broker's one binary: `narad dev` runs a local broker
// with everything embedded (the one-command default), `narad serve` runs one
// node from flags and NARAD_* variables, and the other commands are the
// client CLI over HTTP.
//
// Start with run in main.go, which hands each command to its file:
// server.go runs nodes (runDev, runServe, runNATS), client_cli.go the
// topics, produce and consume commands over the HTTP client in
// cmd/narad/client, bench.go `narad bench` over the same client, and
// cluster_cli.go the cluster commands, which ask the
// NATS admin verbs instead.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
)

const usage = `narad: a queue-first message broker

Usage:
  narad dev [flags]                   run a local broker (embedded NATS, data in ./data/dev)
  narad serve [flags]                 run one node from flags and NARAD_* variables
  narad cert create-ca|create-node|list
                                      the cluster's CA and node certificates for Raft's mutual TLS
  narad nats [--listen ADDR]          run a NATS server; --cluster-listen ADDR --routes URL,... for a NATS cluster
  narad topics create|list|get|delete manage topics over HTTP
  narad produce <topic> [body]        produce one message (body from the argument, --file or stdin)
  narad consume <topic>               consume messages (--ack, --wait, --follow)
  narad bench [flags]                 produce (--consume: and consume) --count records of
                                      --size bytes at --concurrency and --rate; prints
                                      records/s, MiB/s and latency p50/p95/p99
  narad users create|list|grant|passwd|delete
                                      manage users over HTTP (--user, --password or
                                      NARAD_USER, NARAD_PASSWORD on every HTTP command)
  narad cluster members|status|topics|moves|decommission|forget|version|quarantine
                                      ask the cluster over NATS (--nats, --cluster);
                                      moves abort <topic> <partition> gives up a move
  narad version                       the binary's version, commit, Go version and platform
  narad completion bash|zsh|fish      a shell completion script
  narad ctx add|use|list|show|rm      saved contexts: a cluster's server and credentials

Run "narad <command> --help" for a command's flags.
`

func main() {
	ctx, stop := notifyTwice(context.Background())
	err := withConnectionHint(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	stop()
	if code := exitCode(err); code != 0 {
		fmt.Fprintln(os.Stderr, "narad:", err)
		os.Exit(code)
	}
}

// exitCode is the process's exit status after run returned err: 0 for
// success and for help asked for (flag.ErrHelp), 1 for every failure,
// refusals included, so that a script sees them.
func exitCode(err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 1
}

// withConnectionHint names the likely cause of a refused connection:
// nothing listens where the command looked, most often because the broker
// is not running or runs elsewhere.
func withConnectionHint(err error) error {
	var op *net.OpError
	if !errors.Is(err, syscall.ECONNREFUSED) || !errors.As(err, &op) || op.Addr == nil {
		return err
	}
	return fmt.Errorf("%w (is narad dev, or the node, running at %s? --server or NARAD_SERVER names another)", err, op.Addr)
}

// secondSignalKey carries the channel closed at the second stop signal in
// the context run gets.
type secondSignalKey struct{}

// notifyTwice returns a context that ends at the first SIGTERM or SIGINT
// and carries a channel closed at the second one: a node's hand-off at
// shutdown ends at once on the second signal (rule B9), which
// signal.NotifyContext would swallow. stop releases the signals.
func notifyTwice(parent context.Context) (context.Context, func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(parent)
	second, done := make(chan struct{}), make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			select {
			case <-sigs:
			case <-done:
				return
			}
			if i == 0 {
				cancel()
				continue
			}
			close(second)
			return
		}
	}()
	return context.WithValue(ctx, secondSignalKey{}, (<-chan struct{})(second)), func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}

// secondSignal is the channel closed at the second stop signal; nil (never)
// when ctx does not carry one.
func secondSignal(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(secondSignalKey{}).(<-chan struct{})
	return ch
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command")
	}
	switch args[0] {
	case "dev":
		return runDev(ctx, args[1:], stdout, stderr)
	case "serve":
		return runServe(ctx, args[1:], stdout, stderr)
	case "nats":
		return runNATS(ctx, args[1:], stdout, stderr)
	case "cert":
		return runCert(args[1:], stdout, stderr)
	case "topics":
		return runTopics(ctx, args[1:], stdout, stderr)
	case "produce":
		return runProduce(ctx, args[1:], stdin, stdout, stderr)
	case "consume":
		return runConsume(ctx, args[1:], stdout, stderr)
	case "bench":
		return runBench(ctx, args[1:], stdout, stderr)
	case "cluster":
		return runCluster(ctx, args[1:], stdout, stderr)
	case "users":
		return runUsers(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-version":
		return runVersion(args[1:], stdout, stderr)
	case "completion":
		return runCompletion(args[1:], stdout, stderr)
	case "ctx":
		return runCtx(args[1:], stdout, stderr)
	case "__complete":
		return runComplete(ctx, args[1:], stdout)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}
