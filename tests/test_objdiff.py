"""fair.o's production code with the KUnit option on and off: the objdump comparison."""

from pathlib import Path

from schedlab.series import objdiff

DATA = Path(__file__).parent / "data" / "objdiff"


def functions(name: str):
    return objdiff.split_functions((DATA / f"{name}.dis").read_text())


def test_addresses_and_section_offsets_do_not_count():
    insn = "23:\tmov    0x0(,%rdi,8),%rax\t27: R_X86_64_32S\t.rodata+0x10"
    assert objdiff.normalise(insn.split(":\t", 1)[1]) == \
        "mov 0x0(,%rdi,8),%rax\tR_X86_64_32S .rodata"
    assert objdiff.normalise("jg     40 <prod_c+0x10>") == "jg <prod_c+0x10>"


def test_a_named_symbol_keeps_its_addend():
    assert objdiff.normalise("call   9 <prod_a+0x9>\t5: R_X86_64_PLT32\text-0x4") == \
        "call\tR_X86_64_PLT32 ext-0x4"


def test_split_skips_padding_before_a_function():
    text = ("0000000000000000 <foo-0x10>:\n   0:\tnop\n\n"
            "0000000000000010 <foo>:\n  10:\tret\n")
    assert objdiff.split_functions(text) == {"foo": ["ret"]}


def test_test_code_and_its_data_leave_production_code_alone():
    off, on = functions("off"), functions("on")
    c = objdiff.compare("x86_64", off, on)
    assert c.ok
    assert c.same == len(off) == 4
    assert c.tests == ["test_only"]


def test_a_changed_production_function_is_named():
    c = objdiff.compare("x86_64", functions("off"), functions("broken"))
    assert not c.ok
    assert c.differ == ["prod_d"]
    assert any(line.startswith("-lea") or line.startswith("-add") for line in c.diffs["prod_d"])
    assert "1 differ" in objdiff.report(c)


def test_a_function_gone_with_the_option_on_fails():
    off, on = functions("off"), functions("on")
    del on["prod_b"]
    c = objdiff.compare("x86_64", off, on)
    assert c.missing == ["prod_b"] and not c.ok


def test_an_empty_object_is_not_a_pass():
    assert not objdiff.compare("x86_64", {}, {}).ok


def test_padding_moved_by_placement_changes_nothing():
    # The same function where the assembler put one more nop before a loop
    # head: the branch lands on the same instruction.
    a = ("0000000000000000 <f>:\n   0:\tcmpldi r8,2\n   4:\tblt     10 <f+0x10>\n"
         "   8:\tnop\n   c:\tli r8,1\n  10:\tblr\n")
    b = ("0000000000000040 <f>:\n  40:\tcmpldi r8,2\n  44:\tblt     54 <f+0x14>\n"
         "  48:\tnop\n  4c:\tori r2,r2,0\n  50:\tli r8,1\n  54:\tblr\n")
    fa, fb = objdiff.split_functions(a), objdiff.split_functions(b)
    assert fa == fb == {"f": ["cmpldi r8,2", "blt <L3>", "li r8,1", "blr"]}
    # A branch to another instruction is a change.
    c = b.replace("54 <f+0x14>", "50 <f+0x10>")
    assert objdiff.split_functions(c) != fa


def test_section_offsets_are_named_by_the_symbol_there():
    table = ("0000000000000050 l     O .data\t0000000000000004 slice\n"
             "0000000000000054 l     O .data\t0000000000000004 base_slice\n")
    syms = objdiff.symbols(table)
    # A PC-relative reference's addend counts from the end of the field.
    one = objdiff.normalise("mov 0x0(%rip),%eax\t2: R_X86_64_PC32\t.data+0x4c", syms)
    other = objdiff.normalise("mov 0x0(%rip),%eax\t2: R_X86_64_PC32\t.data+0x50", syms)
    assert one.endswith("R_X86_64_PC32 slice") and other.endswith("R_X86_64_PC32 base_slice")
    # Where no symbol covers the offset (merged strings), the section.
    assert objdiff.normalise("mov $0x0,%r10\t3: R_X86_64_32S\t.rodata.str1.1+0x45", syms) \
        .endswith("R_X86_64_32S .rodata.str1.1")


def test_a_clone_of_another_name_is_compared_not_missing():
    off = {"f.constprop.0": ["ret"], "g": ["ret"]}
    on = {"f": ["nop-free", "ret"], "g": ["ret"], "test_case": ["ret"]}
    c = objdiff.compare("x86_64", off, on)
    assert c.differ == ["f.constprop.0 (with the option on: f)"] and not c.missing
    assert c.tests == ["test_case"]


def test_the_option_must_differ_between_the_builds():
    assert objdiff.check_option("CONFIG_KUNIT=y\nCONFIG_SCHED_FAIR_LB_KUNIT_TEST=y\n", "on") == []
    assert objdiff.check_option("CONFIG_KUNIT=y\n# CONFIG_SCHED_FAIR_LB_KUNIT_TEST is not set\n",
                                "off") == []
    assert objdiff.check_option("CONFIG_KUNIT=y\n", "on") == \
        ["CONFIG_SCHED_FAIR_LB_KUNIT_TEST is not y"]
    assert "CONFIG_KUNIT is not y" in objdiff.check_option("", "off")


def test_numbered_statics_and_tail_call_addresses_do_not_count():
    # gcc numbers a function's statics across the object; the tests add some.
    one = objdiff.normalise("mov $0x0,%rsi\t5: R_X86_64_32S\t__func__.1")
    other = objdiff.normalise("mov $0x0,%rsi\t5: R_X86_64_32S\t__func__.99")
    assert one == other and one.endswith("__func__")
    # A relocated tail call: the address shown is the unrelocated field's.
    a = objdiff.normalise("jmp 5 <can_migrate_llc+0x115>\t1: R_X86_64_PLT32\topen_softirq-0x4")
    b = objdiff.normalise("jmp 5 <__loc.24+0x5>\t1: R_X86_64_PLT32\topen_softirq-0x4")
    assert a == b == "jmp\tR_X86_64_PLT32 open_softirq-0x4"
    # Merged strings keep their section's name.
    assert objdiff.normalise("mov $0x0,%r10\t3: R_X86_64_32S\t.rodata.str1.1+0x45") \
        .endswith(".rodata.str1.1")


def test_a_toc_entry_into_text_is_named_by_the_function_there():
    syms = {".text": [(0x2a00, 0x200, "sched_balance_find_dst_group")]}
    toc = objdiff.toc_entries("0000000000000010 R_PPC64_ADDR64    .text+0x0000000000002a98",
                              syms)
    assert toc[".toc"] == [(0x10, 8, "toc(sched_balance_find_dst_group+0x98)")]
