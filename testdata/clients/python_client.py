#!/usr/bin/python3
"""dpproxy's client test for Python: PyMySQL or mysqlclient (MySQLdb), and
SQLAlchemy 1.4 on top of either, the way Superset uses them.

Environment: DPPROXY_HOST, DPPROXY_PORT, DPPROXY_USER, DPPROXY_PASSWORD,
DPPROXY_DB, DPPROXY_CA (optional: connect with TLS, verifying this CA),
DPPROXY_DRIVER (pymysql or mysqldb), DPPROXY_FLOW (the standard flow, JSON),
DPPROXY_PARTS (comma-separated: flow, login, sqlalchemy).

Prints one JSON object per step (see cmd/dpproxy/clients_common_test.go).
"""
import json
import os
import sys

DRIVER = os.environ.get("DPPROXY_DRIVER", "pymysql")
HOST = os.environ["DPPROXY_HOST"]
PORT = int(os.environ["DPPROXY_PORT"])
USER = os.environ["DPPROXY_USER"]
PASSWORD = os.environ["DPPROXY_PASSWORD"]
DB = os.environ.get("DPPROXY_DB", "demo")
CA = os.environ.get("DPPROXY_CA", "")
PARTS = set(os.environ.get("DPPROXY_PARTS", "flow,login,sqlalchemy").split(","))

if DRIVER == "pymysql":
    import pymysql as dbapi
else:
    import MySQLdb as dbapi


def emit(step, columns=None, rows=None, error=None, info=None):
    out = {"step": step}
    if columns is not None:
        out["columns"] = columns
    if rows is not None:
        out["rows"] = rows
    if error is not None:
        out["error"] = error
    if info is not None:
        out["info"] = info
    print(json.dumps(out), flush=True)


def text(v):
    if v is None:
        return None
    if isinstance(v, (bytes, bytearray)):
        return v.decode("utf-8", "replace")
    return str(v)


def error_of(e):
    # DB-API errors carry (code, message); SQLAlchemy wraps them in .orig.
    orig = getattr(e, "orig", None) or e
    args = getattr(orig, "args", ())
    if len(args) >= 2 and isinstance(args[0], int):
        return {"code": args[0], "sqlstate": "", "message": str(args[1])}
    return {"code": -1, "sqlstate": "", "message": "%s: %s" % (type(e).__name__, e)}


def connect(password=PASSWORD):
    kw = dict(host=HOST, port=PORT, user=USER, database=DB, charset="utf8mb4")
    if DRIVER == "pymysql":
        kw["password"] = password
    else:
        kw["passwd"] = password
    if CA:
        kw["ssl"] = {"ca": CA}
    return dbapi.connect(**kw)


def run_flow():
    with open(os.environ["DPPROXY_FLOW"]) as f:
        steps = json.load(f)
    conn = connect()
    for st in steps:
        params = st.get("params") or None
        sql = st["sql"]
        if params is not None:
            sql = sql.replace("%", "%%").replace("?", "%s")
        if params is not None and DRIVER == "mysqldb":
            # as Superset's filters reach mysqlclient: strings, quoted in the SQL
            params = [str(p) for p in params]
        cur = conn.cursor()
        try:
            cur.execute(sql, params)
            if cur.description is None:
                emit(st["step"])
            else:
                cols = [d[0] for d in cur.description]
                rows = [[text(v) for v in row] for row in cur.fetchall()]
                emit(st["step"], cols, rows)
        except dbapi.MySQLError as e:
            emit(st["step"], error=error_of(e))
        finally:
            cur.close()
    info = {}
    if DRIVER == "pymysql":
        sock = getattr(conn, "_sock", None)
        if hasattr(sock, "cipher"):
            info["cipher"] = sock.cipher()[0]
        conn.ping(reconnect=False)  # COM_PING
        conn.select_db(DB)  # COM_INIT_DB
        info["ping"] = True
    emit("connection", info=info)
    conn.close()


def run_login():
    try:
        connect(password=PASSWORD + "-wrong").close()
        emit("bad_password")
    except dbapi.MySQLError as e:
        emit("bad_password", error=error_of(e))


def run_sqlalchemy():
    import sqlalchemy as sa

    scheme = "mysql+pymysql" if DRIVER == "pymysql" else "mysql+mysqldb"
    connect_args = {"ssl": {"ca": CA}} if CA else {}
    url = "%s://%s:%s@%s:%d/%s?charset=utf8mb4" % (scheme, USER, PASSWORD, HOST, PORT, DB)
    engine = sa.create_engine(url, connect_args=connect_args, pool_pre_ping=True)
    emit("sa_version", info={"sqlalchemy": sa.__version__})

    def step(name, fn):
        try:
            fn()
        except Exception as e:  # report, do not stop: the Go side decides
            emit(name, error=error_of(e))

    def reflect():
        insp = sa.inspect(engine)
        cols = insp.get_columns("adult")
        emit("sa_reflect", info={
            "schemas": insp.get_schema_names(),
            "tables": insp.get_table_names(),
            "views": insp.get_view_names(),
            "columns": [c["name"] for c in cols],
            "types": [str(c["type"]) for c in cols],
            "pk": insp.get_pk_constraint("adult").get("constrained_columns"),
            "fks": insp.get_foreign_keys("adult"),
            "indexes": insp.get_indexes("adult"),
            "has_table": insp.has_table("adult"),
            "has_nosuch": insp.has_table("nosuch"),
        })
    step("sa_reflect", reflect)

    def chart():
        meta = sa.MetaData()
        adult = sa.Table("adult", meta, autoload_with=engine)
        q = (sa.select(adult.c.sex, sa.func.count().label("count"))
             .group_by(adult.c.sex)
             .order_by(sa.desc("count"))
             .limit(10000))
        with engine.connect() as c:
            res = c.execute(q)
            emit("sa_chart", list(res.keys()), [[text(v) for v in r] for r in res],
                 info={"sql": str(q.compile(engine))})
    step("sa_chart", chart)

    def raw(name, sql):
        def f():
            with engine.connect() as c:
                res = c.execute(sa.text(sql))
                if res.returns_rows:
                    emit(name, list(res.keys()), [[text(v) for v in r] for r in res])
                else:
                    emit(name)
        step(name, f)

    # Superset: a chart as SQL, SQL Lab's connection id and its row limit,
    # the table check of its dataset editor.
    raw("sa_text_chart", "SELECT adult.sex, count(*) AS count FROM adult GROUP BY adult.sex ORDER BY count DESC LIMIT 10000")
    raw("sa_connection_id", "SELECT CONNECTION_ID()")
    raw("sa_sqllab", "SELECT occupation, COUNT(*) AS n FROM adult WHERE age > 50 GROUP BY occupation ORDER BY n DESC LIMIT 3")
    raw("sa_info_schema", "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = '%s' AND table_name = 'adult'" % DB)
    raw("sa_raw", "SELECT * FROM adult LIMIT 100")
    raw("sa_syntax", "SELEC sex FROM adult")
    engine.dispose()


def main():
    if "flow" in PARTS:
        run_flow()
    if "login" in PARTS:
        run_login()
    if "sqlalchemy" in PARTS:
        run_sqlalchemy()


if __name__ == "__main__":
    main()
