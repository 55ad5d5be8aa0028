/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Built -static: a program ld.so never sees (madvseq run -d must say so). */
int main(void)
{
	return 0;
}
