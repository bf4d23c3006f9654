/* aim7_true: the program aim7's exec_test loads; it does nothing and exits 0 (as true(1)). */
int main(void)
{
	return 0;
}
