package main

import (
	"crypto/rand"
	"io"
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/sharedos/sharedos-run/bridge"
	"github.com/sharedos/sharedos-run/launcher"
)

func mcpCommand() *cli.Command {
	return &cli.Command{
		Name:  "mcp",
		Usage: "serve the managed catalogue to an MCP client outside a turn",
		Subcommands: []*cli.Command{{
			Name:      "serve",
			Usage:     "serve the catalogue over stdio (newline-delimited JSON-RPC); every call is still authorized",
			UsageText: "sharedos-run mcp serve --stdio [--config FILE] [--workspace DIR] [--read-only]",
			Flags: append(configFlags(),
				&cli.BoolFlag{Name: "stdio", Usage: "serve on stdin/stdout (the only transport outside a turn)"},
				&cli.BoolFlag{Name: "verbose", Usage: "log every call to stderr"},
			),
			Action: serveMCP,
		}},
	}
}

func serveMCP(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if !c.Bool("stdio") {
		return usagef("mcp serve needs --stdio (HTTP is served only inside a turn, to the sandboxed harness)")
	}
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	level := slog.LevelWarn
	if c.Bool("verbose") {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: level}))
	opened, err := launcher.OpenTurn(c.Context, cfg, launcher.NewExecutionID())
	if err != nil {
		return err
	}
	defer opened.Close()
	turn, cat := opened.Turn, opened.Catalog
	// Over stdio there is no token to check: whoever holds the pipes started the
	// process. The secret only has to exist.
	secret := make([]byte, 32)
	rand.Read(secret)
	srv, err := bridge.New(bridge.Options{
		Catalog: cat, Turn: turn, Secret: secret, Version: fullVersion(), Logger: logger,
		OnEvent: func(e bridge.Event) {
			logger.Info("bridge", "kind", e.Kind, "tool", e.Tool, "alias", e.Alias, "decision", e.Decision, "code", e.Code, "resource", e.Resource)
		},
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	logger.Info("serving the catalogue over stdio", "workspace", cfg.Workspace, "tools", len(cat.Tools), "catalogHash", cat.CatalogHash)
	return srv.ServeStdio(c.Context, io.NopCloser(c.App.Reader), nopWriteCloser{c.App.Writer})
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
