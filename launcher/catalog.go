// Package launcher runs one turn end to end: it resolves the context and grants,
// builds the kernel and the effective catalogue, and (as the sandbox and bridge land)
// starts the harness, serves the bridge, and writes the execution record. It knows no
// harness by name.
package launcher

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/sharedos/sharedos-run/bridge"
	"github.com/sharedos/sharedos-run/kernel"
	"github.com/sharedos/sharedos-run/runconfig"
	"github.com/sharedos/sharedos-run/tools/files"
)

// Authority is a kernel over a configured workspace, with what must be closed after.
type Authority struct {
	Kernel    *kernel.Kernel
	Workspace *files.Workspace
}

// Close releases the workspace.
func (a *Authority) Close() error { return a.Workspace.Close() }

// NewAuthority opens the workspace's files tools and builds the kernel the
// configuration describes.
func NewAuthority(ctx context.Context, cfg *runconfig.Config, providers ...kernel.Provider) (*Authority, error) {
	ws, err := files.Open(files.Options{Workspace: cfg.Workspace, StateDir: cfg.StateDir})
	if err != nil {
		return nil, fmt.Errorf("opening workspace: %w", err)
	}
	namespaces, err := cfg.Namespaces(ctx)
	if err != nil {
		ws.Close()
		return nil, fmt.Errorf("opening namespace settings: %w", err)
	}
	k, err := kernel.New(kernel.Config{
		Tools:      ws.Tools(),
		Providers:  providers,
		Grants:     kernel.StaticGrants(cfg.Grants),
		Namespaces: namespaces,
		HostDeny:   cfg.HostDeny,
	})
	if err != nil {
		ws.Close()
		return nil, err
	}
	return &Authority{Kernel: k, Workspace: ws}, nil
}

// NewExecutionID returns a fresh execution id ("exec-" and 16 random hex digits).
func NewExecutionID() string {
	var b [8]byte
	rand.Read(b[:])
	return "exec-" + hex.EncodeToString(b[:])
}

// EffectiveCatalog is what the turn publishes: registered tools whose namespace is
// enabled and that some grant makes discoverable. The turn is fixed to it, so a tool
// outside the published catalogue stays unavailable for the rest of the turn.
func EffectiveCatalog(ctx context.Context, turn *kernel.Turn, executionID string) (bridge.Catalog, error) {
	tools, err := turn.Discover(ctx)
	if err != nil {
		return bridge.Catalog{}, err
	}
	cat, err := bridge.NewCatalog(executionID, tools)
	if err != nil {
		return bridge.Catalog{}, err
	}
	names := make([]string, len(cat.Tools))
	for i, t := range cat.Tools {
		names[i] = t.Name
	}
	turn.Publish(names)
	return cat, nil
}

// Opened is a turn's authority ready to serve: the kernel over the workspace, the turn
// for the configured context, and the catalogue it publishes. Close releases it.
type Opened struct {
	*Authority
	Turn    *kernel.Turn
	Catalog bridge.Catalog
}

// OpenTurn builds the authority the configuration describes, begins the turn for its
// context and fixes the turn to its published catalogue.
func OpenTurn(ctx context.Context, cfg *runconfig.Config, executionID string, providers ...kernel.Provider) (*Opened, error) {
	auth, err := NewAuthority(ctx, cfg, providers...)
	if err != nil {
		return nil, err
	}
	turn, err := auth.Kernel.BeginTurn(ctx, cfg.Context, cfg.Budgets)
	if err != nil {
		auth.Close()
		return nil, err
	}
	cat, err := EffectiveCatalog(ctx, turn, executionID)
	if err != nil {
		auth.Close()
		return nil, fmt.Errorf("resolving the catalogue: %w", err)
	}
	return &Opened{Authority: auth, Turn: turn, Catalog: cat}, nil
}
