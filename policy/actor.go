package policy

import (
	"fmt"
	"strings"
)

// ActorKind is who acts: a person, an agent, a group conversation or a service.
type ActorKind string

// The actor kinds SharedOS knows.
const (
	ActorHuman   ActorKind = "human"
	ActorAgent   ActorKind = "agent"
	ActorGroup   ActorKind = "group"
	ActorService ActorKind = "service"
)

// Actor is a principal. Its canonical string form, "<kind>:<id>", is what grants name
// as their subject and what execution tokens carry.
type Actor struct {
	Kind ActorKind
	ID   string
}

// CanonicalActor renders an actor as "<kind>:<id>" after checking both parts.
func CanonicalActor(a Actor) (string, error) {
	switch a.Kind {
	case ActorHuman, ActorAgent, ActorGroup, ActorService:
	default:
		return "", fmt.Errorf("actor kind %q is not one of human, agent, group, service", a.Kind)
	}
	id, err := NormalizeIdentifier("actor id", a.ID)
	if err != nil {
		return "", err
	}
	s := string(a.Kind) + ":" + id
	if n := UTF16Len(s); n > MaxActorLength {
		return "", fmt.Errorf("actor is %d characters long; at most %d are allowed", n, MaxActorLength)
	}
	return s, nil
}

// ParseActor reads "<kind>:<id>" and returns the actor; the id may itself contain ':'.
func ParseActor(s string) (Actor, error) {
	kind, id, ok := strings.Cut(s, ":")
	if !ok {
		return Actor{}, fmt.Errorf("actor %q is not of the form <kind>:<id>", s)
	}
	a := Actor{Kind: ActorKind(kind), ID: id}
	canon, err := CanonicalActor(a)
	if err != nil {
		return Actor{}, fmt.Errorf("actor %q: %w", s, err)
	}
	if canon != s {
		return Actor{}, fmt.Errorf("actor %q is not canonical (expected %q)", s, canon)
	}
	return a, nil
}

// String is the canonical form; it assumes a validated actor.
func (a Actor) String() string { return string(a.Kind) + ":" + a.ID }
