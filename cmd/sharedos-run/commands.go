package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"sigs.k8s.io/yaml"

	"github.com/sharedos/sharedos-run/bridge"
	"github.com/sharedos/sharedos-run/canonjson"
	"github.com/sharedos/sharedos-run/launcher"
	"github.com/sharedos/sharedos-run/policy"
	"github.com/sharedos/sharedos-run/runconfig"
)

// version is the release; builds from a checkout append the VCS revision.
const version = "0.1.0"

func fullVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return version
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return version
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return version + "+" + rev
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the sharedos-run version",
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			fmt.Fprintln(c.App.Writer, "sharedos-run", fullVersion())
			return nil
		},
	}
}

// configFlags are shared by every command that resolves a run configuration.
func configFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "config", Usage: "run configuration `FILE` (JSON or YAML); without it, the default configuration"},
		&cli.StringFlag{Name: "workspace", Usage: "workspace `DIR` (default: the configuration's, else the current directory)"},
		&cli.BoolFlag{Name: "read-only", Usage: "grant read actions only"},
	}
}

func loadConfig(c *cli.Context) (*runconfig.Config, error) {
	return runconfig.Load(c.String("config"), runconfig.Overrides{
		Workspace: c.String("workspace"),
		ReadOnly:  c.Bool("read-only"),
	})
}

func catalogCommand() *cli.Command {
	return &cli.Command{
		Name:  "catalog",
		Usage: "print the effective published catalogue for the context and its catalogHash",
		Flags: append(configFlags(),
			&cli.StringFlag{Name: "execution-id", Usage: "execution `ID` to put in the catalogue (default: a fresh one)"},
			&cli.BoolFlag{Name: "json", Usage: "print the catalogue as JSON"},
		),
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			cfg, err := loadConfig(c)
			if err != nil {
				return err
			}
			execID := c.String("execution-id")
			if execID == "" {
				execID = launcher.NewExecutionID()
			} else if _, err := policy.NormalizeIdentifier("--execution-id", execID); err != nil {
				return usageError{err}
			}
			opened, err := launcher.OpenTurn(c.Context, cfg, execID)
			if err != nil {
				return err
			}
			defer opened.Close()
			cat := opened.Catalog
			if c.Bool("json") {
				return writeJSON(c.App.Writer, cat)
			}
			return printCatalog(c.App.Writer, cfg, cat)
		},
	}
}

func printCatalog(w io.Writer, cfg *runconfig.Config, cat bridge.Catalog) error {
	fmt.Fprintf(w, "workspace:   %s\nconfig:      %s\nexecutionId: %s\ncatalogHash: %s\ntools:       %d\n\n",
		cfg.Workspace, cfg.Source, cat.ExecutionID, cat.CatalogHash, len(cat.Tools))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tHINTS\tDESCRIPTION")
	for _, t := range cat.Tools {
		hints := "write"
		if t.Annotations.ReadOnlyHint {
			hints = "read-only"
		}
		if t.Annotations.DestructiveHint != nil && *t.Annotations.DestructiveHint {
			hints += ",destructive"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, hints, t.Description)
	}
	return tw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func canonicalCommand() *cli.Command {
	return &cli.Command{
		Name:  "canonical",
		Usage: "read one JSON value on stdin and print its SharedOS canonical JSON",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "hash", Usage: "print the SHA-256 hex of the canonical form instead"},
		},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			data, err := io.ReadAll(c.App.Reader)
			if err != nil {
				return fmt.Errorf("reading stdin: %w", err)
			}
			out, err := canonjson.Canonicalize(data)
			if err != nil {
				return fmt.Errorf("stdin: %w", err)
			}
			if c.Bool("hash") {
				h, _ := canonjson.Hash(out)
				fmt.Fprintln(c.App.Writer, h)
				return nil
			}
			_, err = fmt.Fprintf(c.App.Writer, "%s\n", out)
			return err
		},
	}
}

func secretFromEnv(c *cli.Context) ([]byte, error) {
	name := c.String("secret-env")
	if name == "" {
		return nil, usagef("--secret-env VAR is required: the secret is read from that environment variable, never from the command line")
	}
	secret, ok := os.LookupEnv(name)
	if !ok || secret == "" {
		return nil, fmt.Errorf("environment variable %s is not set or empty", name)
	}
	return []byte(secret), nil
}

func tokenCommand() *cli.Command {
	secretFlag := &cli.StringFlag{Name: "secret-env", Usage: "name of the environment `VAR` that holds the HMAC secret"}
	return &cli.Command{
		Name:  "token",
		Usage: "mint and verify SharedOS execution tokens",
		Subcommands: []*cli.Command{
			{
				Name:      "mint",
				Usage:     "read claims JSON on stdin and print a signed execution token",
				UsageText: "sharedos-run token mint --secret-env VAR < claims.json",
				Flags:     []cli.Flag{secretFlag},
				Action: func(c *cli.Context) error {
					if err := noArgs(c); err != nil {
						return err
					}
					secret, err := secretFromEnv(c)
					if err != nil {
						return err
					}
					data, err := io.ReadAll(c.App.Reader)
					if err != nil {
						return fmt.Errorf("reading stdin: %w", err)
					}
					var claims bridge.Claims
					dec := json.NewDecoder(bytes.NewReader(data))
					dec.DisallowUnknownFields()
					if err := dec.Decode(&claims); err != nil {
						return fmt.Errorf("claims on stdin: %w", err)
					}
					token, err := bridge.MintToken(claims, secret)
					if err != nil {
						return err
					}
					fmt.Fprintln(c.App.Writer, token)
					return nil
				},
			},
			{
				Name:      "verify",
				Usage:     "verify an execution token; prints {\"valid\":true,...} or {\"valid\":false,\"reason\":...}",
				UsageText: "sharedos-run token verify --secret-env VAR [--now RFC3339] [--expect key=value]... TOKEN",
				Flags: []cli.Flag{
					secretFlag,
					&cli.StringFlag{Name: "now", Usage: "verify as of this RFC 3339 `TIME` (default: now)"},
					&cli.StringSliceFlag{Name: "expect", Usage: "require claim `KEY=VALUE` (repeatable)"},
				},
				Action: verifyToken,
			},
		},
	}
}

type verifyOutput struct {
	Valid  bool           `json:"valid"`
	Reason string         `json:"reason,omitempty"`
	Claims *bridge.Claims `json:"claims,omitempty"`
}

func verifyToken(c *cli.Context) error {
	if c.Args().Len() != 1 {
		return usagef("token verify takes exactly one TOKEN argument")
	}
	now := time.Now()
	if s := c.String("now"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return usagef("--now: %q is not an RFC 3339 time", s)
		}
		now = t
	}
	expect := map[string]string{}
	for _, kv := range c.StringSlice("expect") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return usagef("--expect %q: want KEY=VALUE", kv)
		}
		if !slices.Contains(bridge.ClaimNames(), k) {
			return usagef("--expect %q: unknown claim %q (one of %s)", kv, k, strings.Join(bridge.ClaimNames(), ", "))
		}
		expect[k] = v
	}
	secret, err := secretFromEnv(c)
	if err != nil {
		return err
	}
	claims, reason := bridge.VerifyToken(c.Args().First(), secret, now, expect)
	out := verifyOutput{Valid: reason == bridge.TokenValid, Reason: string(reason)}
	if out.Valid {
		out.Claims = &claims
	}
	if err := writeJSON(c.App.Writer, out); err != nil {
		return err
	}
	if !out.Valid {
		return exitStatus(exitFailure)
	}
	return nil
}

func policyCommand() *cli.Command {
	return &cli.Command{
		Name:  "policy",
		Usage: "work with ToolPolicy documents",
		Subcommands: []*cli.Command{{
			Name:      "check",
			Usage:     "validate a ToolPolicy or a run configuration file and print its policyHash",
			UsageText: "sharedos-run policy check FILE",
			Action: func(c *cli.Context) error {
				if c.Args().Len() != 1 {
					return usagef("policy check takes exactly one FILE argument")
				}
				return checkPolicy(c, c.Args().First())
			},
		}},
	}
}

// checkPolicy accepts either a bare ToolPolicy or a run configuration (told apart by
// the run configuration's required "workspace" key).
func checkPolicy(c *cli.Context, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	var probe map[string]json.RawMessage
	isConfig := false
	if yamlJSON, err := yaml.YAMLToJSON(data); err == nil && json.Unmarshal(yamlJSON, &probe) == nil {
		_, isConfig = probe["workspace"]
		data = yamlJSON
	}
	var p policy.ToolPolicy
	kind := "tool policy"
	if isConfig {
		cfg, err := runconfig.Load(path, runconfig.Overrides{})
		if err != nil {
			return err
		}
		p, kind = cfg.ToolPolicy, "run configuration"
	} else {
		p, err = policy.ParseToolPolicy(data)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	hash, err := p.Hash()
	if err != nil {
		return err
	}
	canon, _ := canonjson.Marshal(p)
	fmt.Fprintf(c.App.Writer, "%s: valid %s\npolicy:     %s\npolicyHash: %s\n", path, kind, canon, hash)
	return nil
}
