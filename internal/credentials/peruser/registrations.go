package peruser

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/credentials/oauthclient"
)

// Registrations keeps the gateway's RFC 7591 dynamic registrations in a
// Backend of their own (sealed like the tokens: a registration holds a
// client secret), so a restart keeps the client the stored grants belong
// to: without it, every refresh after a restart would be refused and
// every user asked to authorize again.
type Registrations struct {
	b    Backend
	ring *ring
	log  *zap.Logger
}

const purposeRegistration = "mcpgw peruser registration v1"

var _ oauthclient.RegistrationStore = (*Registrations)(nil)

// NewRegistrations keeps registrations in b, sealed with the key ring.
func NewRegistrations(b Backend, keys [][]byte, log *zap.Logger) (*Registrations, error) {
	r, err := newRing(keys, purposeRegistration)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Registrations{b: b, ring: r, log: log}, nil
}

func regStoreKey(issuer, redirectURI string) (key string, ad []byte) {
	h := sha256.Sum256([]byte(issuer + "\x00" + redirectURI))
	return hex.EncodeToString(h[:]), []byte(purposeRegistration + "\x00" + issuer + "\x00" + redirectURI)
}

func regContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}

// Load implements oauthclient.RegistrationStore.
func (s *Registrations) Load(issuer, redirectURI string) (oauthclient.Registration, bool) {
	ctx, cancel := regContext()
	defer cancel()
	k, ad := regStoreKey(issuer, redirectURI)
	val, ok, err := s.b.Get(ctx, k)
	if err != nil {
		s.log.Warn("dynamic registration store unreadable; registering anew", zap.Error(err))
	}
	if !ok {
		return oauthclient.Registration{}, false
	}
	plain, ok := s.ring.open(val, ad)
	var r oauthclient.Registration
	if !ok || json.Unmarshal(plain, &r) != nil || r.Issuer != issuer || r.RedirectURI != redirectURI {
		return oauthclient.Registration{}, false
	}
	return r, true
}

// Store implements oauthclient.RegistrationStore.
func (s *Registrations) Store(r oauthclient.Registration) {
	ctx, cancel := regContext()
	defer cancel()
	k, ad := regStoreKey(r.Issuer, r.RedirectURI)
	plain, _ := json.Marshal(r)
	if err := s.b.Put(ctx, k, s.ring.seal(plain, ad), time.Time{}); err != nil {
		s.log.Warn("dynamic registration not stored: a restart will register anew and its users authorize again", zap.Error(err))
	}
}

// Delete implements oauthclient.RegistrationStore.
func (s *Registrations) Delete(issuer, redirectURI string) {
	ctx, cancel := regContext()
	defer cancel()
	k, _ := regStoreKey(issuer, redirectURI)
	if _, err := s.b.Delete(ctx, k); err != nil {
		s.log.Warn("dynamic registration not deleted", zap.Error(err))
	}
}

// SetKeys rekeys the registrations (the session key ring reread on a
// reload): new ones are sealed with the new first key, old ones still open
// with any key of the ring.
func (s *Registrations) SetKeys(keys [][]byte) error { return s.ring.rekey(keys) }
