package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/sharedos/sharedos-run/conformance"
	"github.com/sharedos/sharedos-run/launcher"
)

// artifactName is the artifact's file name inside --out.
const artifactName = "mcp-conformance.json"

func conformanceCommand() *cli.Command {
	return &cli.Command{
		Name:  "conformance",
		Usage: "run the adversarial cases through every installed harness and print the comparison table",
		UsageText: "sharedos-run conformance [--harness id[,id]] [--case a,b | --limit N | --full] [--config FILE]\n" +
			"                         [--model scripted | --model ID --provider P] [--jobs N] [--shard i/n] [--out DIR]\n" +
			"sharedos-run conformance merge [--out DIR] DIR...",
		Description: "Exit status: 0 when no cell failed (a kernel refusal that did not hold); 1 when one did; 2 usage.",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "harness", Usage: "column ids or harness ids (claude-code, codex, pi, pi/extension, pi/native, deepseek); default: all"},
			&cli.StringSliceFlag{Name: "case", Usage: "case ids to run"},
			&cli.IntFlag{Name: "limit", Value: 1, Usage: "run the first N cases (0: probe the harnesses only)"},
			&cli.BoolFlag{Name: "full", Usage: "run every case"},
			&cli.StringFlag{Name: "config", EnvVars: []string{"SHAREDOS_MCP_CONFIG"}, Usage: "configuration `FILE`: {\"model\":{…},\"harnesses\":{\"<id>\":{\"env\",\"args\",\"credentialVariables\"}}}"},
			&cli.StringFlag{Name: "model", Usage: "\"scripted\" (the default) or a live model `ID`"},
			&cli.StringFlag{Name: "provider", Usage: "provider of a live model"},
			&cli.StringFlag{Name: "key-env", Usage: "environment `VAR` holding a live provider's key"},
			&cli.IntFlag{Name: "jobs", Value: 1, Usage: "cells in parallel, each in its own sandbox"},
			&cli.StringFlag{Name: "shard", Usage: "run slice `i/n` of the cells (1-based)"},
			&cli.StringFlag{Name: "out", Value: filepath.Join("artifacts", "conformance"), Usage: "`DIR` for " + artifactName},
			&cli.StringFlag{Name: "cases", Usage: "case `DIR` (default: testdata/conformance/cases of this checkout)"},
			&cli.DurationFlag{Name: "cell-timeout", Usage: "bound one turn (default 3m)"},
			&cli.BoolFlag{Name: "json", Usage: "print the artifact on stdout instead of the table"},
		},
		Action:      runConformance,
		Subcommands: []*cli.Command{mergeCommand()},
	}
}

func mergeCommand() *cli.Command {
	return &cli.Command{
		Name:      "merge",
		Usage:     "combine shard artifacts into one (the same as an unsharded run, up to timings)",
		ArgsUsage: "DIR...",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Value: filepath.Join("artifacts", "conformance"), Usage: "`DIR` for the merged " + artifactName},
			&cli.BoolFlag{Name: "json", Usage: "print the merged artifact on stdout instead of the table"},
		},
		Action: func(c *cli.Context) error {
			if c.Args().Len() == 0 {
				return usagef("merge needs the shard directories (or artifact files)")
			}
			var shards []*conformance.Artifact
			for _, p := range c.Args().Slice() {
				if st, err := os.Stat(p); err == nil && st.IsDir() {
					p = filepath.Join(p, artifactName)
				}
				a, err := readArtifact(p)
				if err != nil {
					return err
				}
				shards = append(shards, a)
			}
			merged, err := conformance.Merge(shards)
			if err != nil {
				return err
			}
			return finishConformance(c, merged)
		},
	}
}

func readArtifact(path string) (*conformance.Artifact, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading artifact: %w", err)
	}
	var a conformance.Artifact
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("artifact %s: %w", path, err)
	}
	return &a, nil
}

// caseDir finds the case set: --cases, else the checkout of the binary, else ./testdata.
func caseDir(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	var candidates []string
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			candidates = append(candidates, filepath.Join(filepath.Dir(filepath.Dir(real)), "testdata", "conformance", "cases"))
		}
	}
	candidates = append(candidates, filepath.Join("testdata", "conformance", "cases"))
	for _, d := range candidates {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d, nil
		}
	}
	return "", fmt.Errorf("no case set found (looked in %s); pass --cases DIR", strings.Join(candidates, ", "))
}

func parseShard(s string) (*conformance.ShardInfo, error) {
	if s == "" {
		return nil, nil
	}
	i, n, ok := strings.Cut(s, "/")
	idx, err1 := strconv.Atoi(i)
	cnt, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || cnt < 1 || idx < 1 || idx > cnt {
		return nil, usagef("--shard %q: want i/n with 1 ≤ i ≤ n", s)
	}
	return &conformance.ShardInfo{Index: idx, Count: cnt}, nil
}

func splitList(values []string) []string {
	var out []string
	for _, v := range values {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

func runConformance(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	dir, err := caseDir(c.String("cases"))
	if err != nil {
		return err
	}
	set, err := conformance.LoadCases(dir)
	if err != nil {
		return err
	}
	limit := c.Int("limit")
	if c.Bool("full") {
		limit = -1
	}
	cases, err := set.Select(splitList(c.StringSlice("case")), limit)
	if err != nil {
		return usageError{err}
	}
	columns, err := conformance.SelectColumns(conformance.DefaultColumns(), splitList(c.StringSlice("harness")))
	if err != nil {
		return usageError{err}
	}
	shard, err := parseShard(c.String("shard"))
	if err != nil {
		return err
	}
	if c.Int("jobs") < 1 {
		return usagef("--jobs must be at least 1")
	}
	var cfg conformance.Config
	if p := c.String("config"); p != "" {
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("reading --config: %w", err)
		}
		if cfg, err = conformance.ParseConfig(data); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	if m := c.String("model"); m != "" && m != "scripted" {
		if c.String("provider") == "" {
			return usagef("a live --model needs --provider")
		}
		cfg.Model = &conformance.ConfigModel{ID: m, Provider: c.String("provider"), KeyEnv: c.String("key-env")}
	}
	art, err := conformance.Run(c.Context, conformance.Options{
		CaseSet: set, Cases: cases, Columns: columns, Config: cfg, Prefixes: launcher.HarnessPrefixes(),
		Version: fullVersion(), Jobs: c.Int("jobs"), Shard: shard, CellTimeout: c.Duration("cell-timeout"),
		Progress: c.App.ErrWriter, Logger: loggerOf(c),
	})
	if err != nil {
		return err
	}
	return finishConformance(c, art)
}

func finishConformance(c *cli.Context, art *conformance.Artifact) error {
	out := c.String("out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("creating --out: %w", err)
	}
	path := filepath.Join(out, artifactName)
	if err := writeJSONFile(path, art); err != nil {
		return fmt.Errorf("writing the artifact: %w", err)
	}
	for _, w := range art.Warnings {
		fmt.Fprintf(c.App.ErrWriter, "sharedos-run: warning: %s\n", w)
	}
	if c.Bool("json") {
		if err := writeJSON(c.App.Writer, art); err != nil {
			return err
		}
	} else {
		printTable(c.App.Writer, art)
		fmt.Fprintf(c.App.Writer, "\nartifact: %s\n", path)
	}
	for _, row := range art.Rows {
		for _, cell := range row.Cells {
			if cell.Status == conformance.StatusFail {
				return exitStatus(exitFailure)
			}
		}
	}
	return nil
}

func printTable(w io.Writer, a *conformance.Artifact) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "harness\tavailable\tversion\tmcp\n")
	for _, av := range a.Availability {
		state, version := "yes", av.Version
		if !av.Available {
			state, version = "no: "+av.Reason, "-"
			if len(state) > 72 {
				state = state[:72] + "… (see the artifact)"
			}
		}
		mcp := av.MCPSupport
		if av.MCPExtension != "" {
			mcp += " (" + av.MCPExtension + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", av.ColumnID, state, version, mcp)
	}
	tw.Flush()
	fmt.Fprintln(w)
	if len(a.Rows) == 0 {
		fmt.Fprintln(w, "no cases run (--limit 0 probes the harnesses only)")
		return
	}
	fmt.Fprint(tw, "case")
	for _, av := range a.Availability {
		fmt.Fprintf(tw, "\t%s", av.ColumnID)
	}
	fmt.Fprintln(tw)
	for _, row := range a.Rows {
		fmt.Fprint(tw, row.CaseID)
		for _, av := range a.Availability {
			status := "·"
			for _, cell := range row.Cells {
				if cell.ColumnID == av.ColumnID {
					status = cell.Status
					if len(cell.ReasonCodes) > 0 {
						status += " (" + strings.Join(cell.ReasonCodes, ",") + ")"
					}
				}
			}
			fmt.Fprintf(tw, "\t%s", status)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	counts := map[string]int{}
	for _, row := range a.Rows {
		for _, cell := range row.Cells {
			counts[cell.Status]++
		}
	}
	fmt.Fprintf(w, "\n%d pass, %d fail, %d not_exercised, %d not_applicable · cases %d of %d · elapsed %.1fs\n",
		counts[conformance.StatusPass], counts[conformance.StatusFail], counts[conformance.StatusNotExercised], counts[conformance.StatusNotApplicable],
		len(a.CasesRun), len(a.CasesDeclared), a.ElapsedMs/1000)
}
