/*
 * rg_fastpath.c
 *		A fast-path function call (PQfn, here through libpq's large-object
 *		API): open large object OID for reading in a transaction, and say
 *		whether the server refused it.
 *
 * Usage: rg_fastpath CONNINFO OID
 * Prints "opened" or "refused: <the server's message>"; exits 2 if it
 * cannot connect.
 */
#include <stdio.h>
#include <stdlib.h>

#include "libpq-fe.h"
#include "libpq/libpq-fs.h"

int
main(int argc, char **argv)
{
	PGconn	   *conn;
	int			fd;

	if (argc != 3)
	{
		fprintf(stderr, "usage: rg_fastpath CONNINFO OID\n");
		return 2;
	}
	conn = PQconnectdb(argv[1]);
	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "connect: %s", PQerrorMessage(conn));
		return 2;
	}
	PQclear(PQexec(conn, "BEGIN"));
	fd = lo_open(conn, (Oid) strtoul(argv[2], NULL, 10), INV_READ);
	if (fd < 0)
		printf("refused: %s", PQerrorMessage(conn));
	else
		printf("opened\n");
	PQfinish(conn);
	return 0;
}
