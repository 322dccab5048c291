package budget

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// entryDomain starts every encoded entry, so that a hash of an entry can not
// be confused with a hash of anything else.
const entryDomain = "dpproxy-ledger-entry/v1"

// hashEntry returns the hex SHA-256 of the canonical encoding of e, where ts
// is e.Time as stored (UTC, RFC 3339 with nine fractional digits, see
// timeLayout). The encoding is the concatenation, in this order, of
//
//	str(entryDomain)
//	u64(Seq)
//	str(time)  str(Kind)  str(User)
//	u32(ConnID)
//	u64(len(Tables))  str(Tables[0]) ... str(Tables[n-1])
//	str(Mechanism)  str(Strategy)
//	u64(Float64bits(Cost.Epsilon))  u64(Float64bits(Cost.Rho))
//	str(QueryDigest)
//	str(PrevHash)
//	[str("unit")  str(unit JSON)]   only for a charge under a privacy unit
//	[str("delta") u64(Float64bits(Cost.Delta))]   only for a charge that spends δ
//	[str("spaces") u64(len(Spaces)) str(Spaces[0]) ... ]   only for an entry naming spaces
//
// where u32/u64 are big-endian unsigned integers and str(s) is u64(len(s))
// followed by the bytes of s. Costs enter by their exact IEEE 754 bits. The
// encoding is injective, so two different entries never share an encoding.
// PrevHash is the previous entry's Hash (64 zeros for entry 1), so each hash
// commits to the whole chain before it.
func hashEntry(e *Entry, ts string) string {
	b := make([]byte, 0, 512)
	str := func(s string) {
		b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	str(entryDomain)
	b = binary.BigEndian.AppendUint64(b, uint64(e.Seq))
	str(ts)
	str(e.Kind)
	str(e.User)
	b = binary.BigEndian.AppendUint32(b, e.ConnID)
	b = binary.BigEndian.AppendUint64(b, uint64(len(e.Tables)))
	for _, t := range e.Tables {
		str(t)
	}
	str(e.Mechanism)
	str(e.Strategy)
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(e.Cost.Epsilon))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(e.Cost.Rho))
	str(e.QueryDigest)
	str(e.PrevHash)
	// A charge under a privacy unit commits to it too; entries without one
	// (all entries before units existed) hash as they always did.
	if unit, err := encodeUnit(e.Unit); err == nil && unit != "" {
		str("unit")
		str(unit)
	}
	// Likewise a charge that spends δ; entries written before δ was
	// accounted spent none and keep their hashes.
	if e.Cost.Delta != 0 {
		str("delta")
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(e.Cost.Delta))
	}
	// Likewise the privacy unit spaces: entries written before spaces name
	// none and keep their hashes.
	if len(e.Spaces) > 0 {
		str("spaces")
		b = binary.BigEndian.AppendUint64(b, uint64(len(e.Spaces)))
		for _, sp := range e.Spaces {
			str(sp)
		}
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// scanEntries runs q (selecting entryColumns) and calls fn for every row with
// the decoded entry and its stored time text. A row that does not decode is
// reported as a *TamperError: this package never writes one.
func scanEntries(ctx context.Context, tx querier, q string, args []any, fn func(Entry, string) error) error {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("query entries: %w", err)
	}
	defer rows.Close()
	raw := make([]any, 16)
	ptrs := make([]any, len(raw))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return fmt.Errorf("scan entry: %w", err)
		}
		e, ts, err := decodeEntry(raw)
		if err != nil {
			return &TamperError{Seq: e.Seq, Reason: "undecodable entry: " + err.Error()}
		}
		if err := fn(e, ts); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read entries: %w", err)
	}
	return nil
}

// decodeEntry decodes one row of entryColumns, strictly: every column must
// have the type this package writes.
func decodeEntry(raw []any) (Entry, string, error) {
	var e Entry
	seq, ok := raw[0].(int64)
	if !ok {
		return e, "", fmt.Errorf("seq is %T", raw[0])
	}
	e.Seq = seq
	var err error
	text := func(i int, name string) string {
		s, ok := raw[i].(string)
		if !ok && err == nil {
			err = fmt.Errorf("%s is %T, want text", name, raw[i])
		}
		return s
	}
	num := func(i int, name string) float64 {
		switch v := raw[i].(type) {
		case float64:
			return v
		case int64: // SQLite may store an integral REAL as an integer
			return float64(v)
		}
		if err == nil {
			err = fmt.Errorf("%s is %T, want real", name, raw[i])
		}
		return 0
	}
	ts := text(1, "time")
	e.Kind = text(2, "kind")
	e.User = text(3, "user_name")
	conn, ok := raw[4].(int64)
	if (!ok || conn < 0 || conn > math.MaxUint32) && err == nil {
		err = fmt.Errorf("conn_id %v is not a uint32", raw[4])
	}
	e.ConnID = uint32(conn)
	tables := text(5, "tables_json")
	e.Mechanism = text(6, "mechanism")
	e.Strategy = text(7, "strategy")
	e.Cost.Epsilon = num(8, "epsilon")
	e.Cost.Rho = num(9, "rho")
	e.QueryDigest = text(10, "query_digest")
	e.PrevHash = text(11, "prev_hash")
	e.Hash = text(12, "hash")
	unit := text(13, "unit_json")
	e.Cost.Delta = num(14, "delta")
	spaces := text(15, "spaces_json")
	if err != nil {
		return e, "", err
	}
	if spaces != "" {
		if err := json.Unmarshal([]byte(spaces), &e.Spaces); err != nil || len(e.Spaces) == 0 {
			return e, "", fmt.Errorf("spaces_json %q is not a non-empty list", spaces)
		}
		if again, _ := json.Marshal(e.Spaces); string(again) != spaces {
			return e, "", errors.New("spaces_json not in canonical form")
		}
	}
	if e.Unit, err = decodeUnit(unit); err != nil {
		return e, "", fmt.Errorf("unit_json: %w", err)
	}
	if e.Time, err = time.Parse(time.RFC3339Nano, ts); err != nil {
		return e, "", fmt.Errorf("time: %w", err)
	}
	e.Time = e.Time.UTC()
	if err := json.Unmarshal([]byte(tables), &e.Tables); err != nil {
		return e, "", fmt.Errorf("tables_json: %w", err)
	}
	if len(e.Tables) == 0 {
		e.Tables = nil
	}
	return e, ts, nil
}

// Verify checks the ledger from its entries alone and returns a *TamperError
// naming the first bad entry, or nil. In one consistent snapshot it
//
//   - walks the entries in Seq order and checks that the sequence numbers
//     run 1, 2, 3, ... without gaps, that each PrevHash is the previous
//     entry's Hash (64 zeros for entry 1), that each Hash is the hash of the
//     entry's canonical encoding (see hashEntry), that times never go
//     backwards, and that each entry is one this package could have written
//     (known kind, zero cost unless a charge, valid costs and names);
//   - checks that the head row (written in the same transaction as every
//     entry) records exactly the number of entries and the last hash, which
//     detects a truncated tail and entries appended behind the ledger's back;
//   - recomputes every scope's spend from the entries (each table of an
//     entry that names no space in the space the ledger maps it to, see
//     MapSpaces) and checks that the spent aggregates, which Charge trusts,
//     agree bit for bit.
//
// So it detects any edit of an entry's fields, and any deletion, reordering,
// insertion or truncation of entries, unless the head, every later hash and
// the aggregate were rewritten consistently too. The chain is not keyed: a
// party with write access to the file and this source can rebuild a
// consistent chain, replace the file with an older copy, or empty it
// entirely (an empty ledger verifies). Detecting that needs an anchor kept
// elsewhere: sign the head from time to time ([Ledger.SignHead]) and keep
// the signed heads apart from the file; a later ledger must still have the
// signed hash at the signed Seq. An edit of the aggregate lets Charge
// overspend until the next Verify, which then reports it; the entries stay
// the authority.
func (l *Ledger) Verify(ctx context.Context) error {
	if err := l.FlushReuses(ctx); err != nil {
		return err
	}
	err := l.read(ctx, func(tx *sql.Tx) error {
		_, _, err := verifyTx(ctx, tx)
		return err
	})
	var te *TamperError
	if errors.As(err, &te) {
		l.log.WarnContext(ctx, "ledger verification failed", "seq", te.Seq, "reason", te.Reason)
		return te
	}
	if err != nil {
		return fmt.Errorf("budget: verify: %w", err)
	}
	return nil
}

// verifyTx is Verify inside tx; it returns the verified head.
func verifyTx(ctx context.Context, tx *sql.Tx) (int64, string, error) {
	next, prev := int64(1), genesisHash
	var last time.Time
	sum := map[scope]Cost{}
	m, err := spaceMapTx(ctx, tx)
	if err != nil {
		return 0, "", err
	}
	err = scanEntries(ctx, tx, "SELECT "+entryColumns+" FROM entries ORDER BY seq", nil, func(e Entry, ts string) error {
		switch {
		case e.Seq > next:
			return &TamperError{Seq: next, Reason: fmt.Sprintf("entry %d is missing (the next stored entry is %d)", next, e.Seq)}
		case e.Seq < next:
			return &TamperError{Seq: next, Reason: fmt.Sprintf("an entry numbered %d stands where entry %d is due", e.Seq, next)}
		}
		if e.PrevHash != prev {
			return &TamperError{Seq: e.Seq, Reason: "prev_hash does not match the hash of the entry before it"}
		}
		if e.Hash != hashEntry(&e, ts) {
			return &TamperError{Seq: e.Seq, Reason: "hash does not match the entry's contents"}
		}
		if e.Time.Before(last) {
			return &TamperError{Seq: e.Seq, Reason: "time is earlier than the entry before it"}
		}
		if reason := invalidEntry(e); reason != "" {
			return &TamperError{Seq: e.Seq, Reason: reason}
		}
		accumulate(sum, e, m)
		next, prev, last = next+1, e.Hash, e.Time
		return nil
	})
	if err != nil {
		return 0, "", err
	}
	n := next - 1

	var headSeq int64
	var headHash string
	switch err := tx.QueryRowContext(ctx, "SELECT seq, hash FROM head WHERE id = 1").Scan(&headSeq, &headHash); {
	case errors.Is(err, sql.ErrNoRows):
		return 0, "", &TamperError{Reason: "the head row is missing"}
	case err != nil:
		return 0, "", fmt.Errorf("read head: %w", err)
	}
	switch {
	case headSeq > n:
		return 0, "", &TamperError{Seq: n + 1, Reason: fmt.Sprintf("ledger truncated: the head records %d entries but only %d are stored", headSeq, n)}
	case headSeq < n:
		return 0, "", &TamperError{Seq: headSeq + 1, Reason: fmt.Sprintf("entry beyond the head: the head records %d entries but %d are stored", headSeq, n)}
	case headHash != prev:
		return 0, "", &TamperError{Seq: n, Reason: "the head hash does not match the last entry"}
	}

	rows, err := tx.QueryContext(ctx, `SELECT user_name, table_name, '', epsilon, rho, delta FROM spent
		UNION ALL SELECT user_name, '', space_name, epsilon, rho, delta FROM spent_spaces`)
	if err != nil {
		return 0, "", fmt.Errorf("query spent: %w", err)
	}
	defer rows.Close()
	seen := map[scope]bool{}
	for rows.Next() {
		var k scope
		var c Cost
		if err := rows.Scan(&k.user, &k.table, &k.space, &c.Epsilon, &c.Rho, &c.Delta); err != nil {
			return 0, "", &TamperError{Reason: "undecodable spent row: " + err.Error()}
		}
		want, ok := sum[k]
		if !ok {
			return 0, "", &TamperError{Reason: fmt.Sprintf("spent aggregate has a row for %s that no entry explains", k)}
		}
		if math.Float64bits(c.Epsilon) != math.Float64bits(want.Epsilon) || math.Float64bits(c.Rho) != math.Float64bits(want.Rho) ||
			math.Float64bits(c.Delta) != math.Float64bits(want.Delta) {
			return 0, "", &TamperError{Reason: fmt.Sprintf("spent aggregate for %s is ε=%g ρ=%g δ=%g but the entries add up to ε=%g ρ=%g δ=%g",
				k, c.Epsilon, c.Rho, c.Delta, want.Epsilon, want.Rho, want.Delta)}
		}
		seen[k] = true
	}
	if err := rows.Err(); err != nil {
		return 0, "", fmt.Errorf("read spent: %w", err)
	}
	for k := range sum {
		if !seen[k] {
			return 0, "", &TamperError{Reason: fmt.Sprintf("spent aggregate has no row for %s", k)}
		}
	}
	return n, prev, nil
}

// invalidEntry says why e is not an entry this package writes, or "".
func invalidEntry(e Entry) string {
	switch e.Kind {
	case KindCharge, KindReuse, KindDerived, KindLimits:
	default:
		return fmt.Sprintf("unknown kind %q", e.Kind)
	}
	n, err := normaliseCharge(e.Charge, e.Kind == KindCharge)
	if err != nil {
		return "invalid entry: " + err.Error()
	}
	if !slices.Equal(n.Tables, e.Tables) || !slices.Equal(n.Spaces, e.Spaces) || n.QueryDigest != e.QueryDigest {
		return "tables, spaces or digest not in canonical form"
	}
	if e.Kind != KindCharge && !e.Cost.IsZero() {
		return fmt.Sprintf("a %s entry with a cost", e.Kind)
	}
	return ""
}

func (k scope) String() string {
	switch {
	case k.space != "" && k.user == "":
		return fmt.Sprintf("space %q (all users)", k.space)
	case k.space != "":
		return fmt.Sprintf("user %q in space %q", k.user, k.space)
	case k.user == "":
		return fmt.Sprintf("table %q (all users)", k.table)
	case k.table == "":
		return fmt.Sprintf("user %q (all tables)", k.user)
	}
	return fmt.Sprintf("user %q on table %q", k.user, k.table)
}

// headPrefix starts every head string, so that a signature over a head can
// not be taken for a signature over anything else.
const headPrefix = "dpproxy-ledger-head/v1 "

// SignHead verifies the ledger and signs its head, in one snapshot. The head
// is the text "dpproxy-ledger-head/v1 seq=<n> hash=<hex>": the number of
// entries and the last entry's Hash (64 zeros for an empty ledger). Kept
// apart from the ledger file, a signed head lets an auditor check later that
// the ledger still holds that exact prefix (see ParseHead). It refuses to
// sign a ledger that fails Verify.
func (l *Ledger) SignHead(ctx context.Context, priv ed25519.PrivateKey) (head string, sig []byte, err error) {
	if err := l.FlushReuses(ctx); err != nil {
		return "", nil, err
	}
	if len(priv) != ed25519.PrivateKeySize {
		return "", nil, fmt.Errorf("budget: sign head: private key has %d bytes, want %d", len(priv), ed25519.PrivateKeySize)
	}
	err = l.read(ctx, func(tx *sql.Tx) error {
		seq, hash, err := verifyTx(ctx, tx)
		if err != nil {
			return err
		}
		head = fmt.Sprintf("%sseq=%d hash=%s", headPrefix, seq, hash)
		return nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("budget: sign head: %w", err)
	}
	return head, ed25519.Sign(priv, []byte(head)), nil
}

// VerifyHeadSignature reports whether sig is pub's signature of head and
// head is a well-formed ledger head.
func VerifyHeadSignature(pub ed25519.PublicKey, head string, sig []byte) bool {
	if len(pub) != ed25519.PublicKeySize {
		return false
	}
	if _, _, err := ParseHead(head); err != nil {
		return false
	}
	return ed25519.Verify(pub, []byte(head), sig)
}

// ParseHead returns the entry count and last hash recorded in a head string
// made by SignHead.
func ParseHead(head string) (seq int64, hash string, err error) {
	rest, ok := strings.CutPrefix(head, headPrefix)
	if !ok {
		return 0, "", fmt.Errorf("budget: head %q does not start with %q", head, headPrefix)
	}
	s, h, ok := strings.Cut(rest, " ")
	if !ok {
		return 0, "", fmt.Errorf("budget: malformed head %q", head)
	}
	s, ok1 := strings.CutPrefix(s, "seq=")
	h, ok2 := strings.CutPrefix(h, "hash=")
	if !ok1 || !ok2 {
		return 0, "", fmt.Errorf("budget: malformed head %q", head)
	}
	if seq, err = strconv.ParseInt(s, 10, 64); err != nil || seq < 0 || strconv.FormatInt(seq, 10) != s {
		return 0, "", fmt.Errorf("budget: malformed head sequence %q", s)
	}
	if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size || strings.ToLower(h) != h {
		return 0, "", fmt.Errorf("budget: malformed head hash %q", h)
	}
	return seq, h, nil
}
