// The target that owns the test suite's precompiled header
// (tests/pch/CMakeLists.txt); the program itself does nothing.
int main() { return 0; }
