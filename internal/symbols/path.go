package symbols

import "debug/elf"

// Path is the name the file was opened with.
func (f *File) Path() string { return f.name }

// BuildIDOf reads only the GNU build id of the ELF file at path, without loading its
// symbols: executables such as node carry hundreds of thousands. It returns "" on error.
func BuildIDOf(path string) string {
	ef, err := elf.Open(path)
	if err != nil {
		return ""
	}
	defer ef.Close()
	return buildID(ef)
}

// Machine is the architecture the file's code is for.
func (f *File) Machine() elf.Machine { return f.elf.Machine }
