// Command sharedos-run runs a coding-agent CLI for one turn in a sandbox whose only way
// to act is a managed tool catalogue, authorized call by call. This file holds the
// command tree, flags and exit codes; the work is done by the packages it calls.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/sharedos/sharedos-run/sandbox"
)

// Exit codes of sharedos-run itself.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// usageError marks a mistake in how the command was called (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// exitStatus carries a specific exit code with no further message (the command has
// already said what it had to).
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func main() {
	// The sandbox stub is this binary re-executed inside new namespaces; it must run
	// before anything else starts (it locks its thread to drop privileges).
	if len(os.Args) > 1 && os.Args[1] == sandbox.StubArg {
		os.Exit(sandbox.RunStub())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	app := newApp(stdin, stdout, stderr, logger)
	err := app.RunContext(ctx, args)
	if err == nil {
		return exitOK
	}
	var status exitStatus
	if errors.As(err, &status) {
		return int(status)
	}
	fmt.Fprintf(stderr, "sharedos-run: %v\n", err)
	var usage usageError
	if errors.As(err, &usage) {
		return exitUsage
	}
	return exitFailure
}

func newApp(stdin io.Reader, stdout, stderr io.Writer, logger *slog.Logger) *cli.App {
	onUsage := func(_ *cli.Context, err error, _ bool) error { return usageError{err} }
	app := &cli.App{
		Name:      "sharedos-run",
		Usage:     "run a coding-agent CLI for one turn against a managed, authorized tool catalogue",
		Reader:    stdin,
		Writer:    stdout,
		ErrWriter: stderr,
		// Errors are printed once, by run, with the right exit code.
		ExitErrHandler:  func(*cli.Context, error) {},
		OnUsageError:    onUsage,
		HideHelpCommand: true,
		Commands: []*cli.Command{
			catalogCommand(),
			canonicalCommand(),
			tokenCommand(),
			policyCommand(),
			mcpCommand(),
			conformanceCommand(),
			versionCommand(),
			execCommand(),
			doctorCommand(),
		},
		CommandNotFound: func(c *cli.Context, name string) {
			fmt.Fprintf(stderr, "sharedos-run: unknown command %q (see sharedos-run --help)\n", name)
		},
		Metadata: map[string]any{"logger": logger},
	}
	app.Commands = append(app.Commands, harnessCommands()...)
	for _, c := range app.Commands {
		setUsageHandler(c, onUsage)
	}
	app.Action = func(c *cli.Context) error {
		if c.Args().Len() > 0 {
			return usagef("unknown command %q (see sharedos-run --help)", c.Args().First())
		}
		return cli.ShowAppHelp(c)
	}
	return app
}

func setUsageHandler(c *cli.Command, h cli.OnUsageErrorFunc) {
	c.OnUsageError = h
	for _, sub := range c.Subcommands {
		setUsageHandler(sub, h)
	}
}

// noArgs refuses positional arguments on commands that take none.
func noArgs(c *cli.Context) error {
	if c.Args().Len() > 0 {
		return usagef("%s takes no arguments, got %q", c.Command.FullName(), c.Args().Slice())
	}
	return nil
}
