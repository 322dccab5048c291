package budget

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
)

// Report is the outcome of [Ledger.Report]: the checks of `dpproxy audit
// verify` as data, for viewers that show them (the web console).
type Report struct {
	// OK: the chain is intact, no charge went over the limit in force, and
	// every signed head checked verifies and is held by the ledger.
	OK      bool `json:"ok"`
	Entries int  `json:"entries"`
	// ChainIntact: Verify found nothing (hash chain, head row, spent
	// aggregate; see [Ledger.Verify]).
	ChainIntact bool `json:"chain_intact"`
	// WithinLimits: CheckSpending found no charge over the limit in force
	// (false when the chain is broken: not checked).
	WithinLimits bool `json:"within_limits"`
	// BadSeq is the first bad entry (0 when the problem is not one entry's
	// or there is none); Problem says what is wrong.
	BadSeq  int64  `json:"bad_seq,omitempty"`
	Problem string `json:"problem,omitempty"`
	// Heads is the check of the signed heads; nil without a public key.
	Heads *HeadsReport `json:"signed_heads,omitempty"`
}

// HeadsReport is the check of a signed-heads file against a public key.
type HeadsReport struct {
	PublicKey string `json:"public_key"` // hex
	File      string `json:"file"`
	Found     bool   `json:"found"`   // the file exists
	Checked   int    `json:"checked"` // heads that verified and are held, before any problem
	Latest    string `json:"latest,omitempty"`
	OK        bool   `json:"ok"`
	BadSeq    int64  `json:"bad_seq,omitempty"`
	Problem   string `json:"problem,omitempty"`
}

// Report runs every check of an audit: Verify, then CheckSpending against
// current (the catalog's limits as rules, see CheckSpending), then, when pub
// is not nil, every head of the signed-heads file at headsPath (signature
// and CheckHead). Findings go into the Report; the error is for failures to
// read at all. A damaged file (IsDamaged) is a finding.
func (l *Ledger) Report(ctx context.Context, current []Limit, pub ed25519.PublicKey, headsPath string) (Report, error) {
	var r Report
	finding := func(err error) (bool, error) {
		var te *TamperError
		switch {
		case errors.As(err, &te):
			r.BadSeq, r.Problem = te.Seq, te.Reason
		case IsDamaged(err):
			r.Problem = "the ledger file is damaged (truncated or corrupted): " + err.Error()
		default:
			return false, err
		}
		return true, nil
	}
	if err := l.Verify(ctx); err != nil {
		if ok, err := finding(err); !ok {
			return r, err
		}
		return r, nil
	}
	r.ChainIntact = true
	entries, err := l.Entries(ctx, Filter{})
	if err != nil {
		if ok, err := finding(err); !ok {
			return r, err
		}
		r.ChainIntact = false
		return r, nil
	}
	r.Entries = len(entries)
	var oe *OverspendError
	if err := CheckSpending(entries, current); errors.As(err, &oe) {
		r.BadSeq, r.Problem = oe.Seq, oe.Error()
	} else if err != nil {
		return r, err
	} else {
		r.WithinLimits = true
	}
	r.OK = r.WithinLimits
	if pub != nil {
		h := l.checkHeads(ctx, pub, headsPath)
		r.Heads = &h
		r.OK = r.OK && h.OK
	}
	return r, nil
}

func (l *Ledger) checkHeads(ctx context.Context, pub ed25519.PublicKey, path string) HeadsReport {
	h := HeadsReport{PublicKey: EncodePublicKey(pub), File: path}
	hs, err := ReadSignedHeads(path)
	if errors.Is(err, os.ErrNotExist) {
		h.OK = true // nothing signed yet
		return h
	}
	h.Found = true
	if err != nil {
		h.Problem = err.Error()
		return h
	}
	for i, sh := range hs {
		if !VerifyHeadSignature(pub, sh.Head, sh.Sig) {
			h.Problem = fmt.Sprintf("signed head %d (%s): the signature does not verify with the key", i+1, sh.Head)
			return h
		}
		if err := l.CheckHead(ctx, sh.Head); err != nil {
			var te *TamperError
			if errors.As(err, &te) {
				h.BadSeq, h.Problem = te.Seq, te.Reason
			} else {
				h.Problem = err.Error()
			}
			return h
		}
		h.Checked++
		h.Latest = sh.Head
	}
	h.OK = true
	return h
}
