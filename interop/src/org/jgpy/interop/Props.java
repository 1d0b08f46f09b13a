package org.jgpy.interop;

import org.jgroups.annotations.DeprecatedProperty;
import org.jgroups.annotations.Property;
import org.jgroups.util.Util;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.TreeSet;

/**
 * The XML property names a 2.12 protocol class accepts, as its Configurator finds them: {@code @Property}
 * fields (the annotation's name, else the field's) and setters (the annotation's name, else the method's,
 * through {@code Util.methodNameToAttributeName}) of the class and its superclasses, and the names of
 * {@code @DeprecatedProperty}; "aliases" are the names of fields whose annotation names them otherwise (2.12's
 * Configurator accepts those too). One JSON object per line per class named on the command line:
 * {@code {"class":..., "properties":[...], "aliases":[...], "deprecated":[...]}}, or {@code "error"} when the
 * class is missing.
 */
public final class Props {
    private Props() {}

    public static void main(String[] args) {
        for (String name : args) {
            StringBuilder out = new StringBuilder("{\"class\":");
            Json.quote(name, out);
            try {
                Class<?> cls = Class.forName(name);
                TreeSet<String> props = new TreeSet<>(), aliases = new TreeSet<>(), deprecated = new TreeSet<>();
                for (Class<?> c = cls; c != null && c != Object.class; c = c.getSuperclass()) {
                    for (Field f : c.getDeclaredFields()) {
                        Property p = f.getAnnotation(Property.class);
                        if (p != null) {
                            props.add(p.name().isEmpty() ? f.getName() : p.name());
                            if (!p.name().isEmpty() && !p.name().equals(f.getName()))
                                aliases.add(f.getName());   // the Configurator falls back to the field's name
                        }
                    }
                    for (Method m : c.getDeclaredMethods()) {
                        Property p = m.getAnnotation(Property.class);
                        if (p != null && m.getParameterTypes().length == 1)
                            props.add(Util.methodNameToAttributeName(p.name().isEmpty() ? m.getName() : p.name()));
                    }
                    DeprecatedProperty d = c.getAnnotation(DeprecatedProperty.class);
                    if (d != null)
                        for (String n : d.names())
                            deprecated.add(n);
                }
                out.append(",\"properties\":").append(list(props)).append(",\"aliases\":").append(list(aliases))
                   .append(",\"deprecated\":").append(list(deprecated));
            } catch (ClassNotFoundException | LinkageError e) {
                out.append(",\"error\":");
                Json.quote(e.toString(), out);
            }
            System.out.println(out.append('}'));
        }
    }

    private static String list(TreeSet<String> names) {
        StringBuilder sb = new StringBuilder("[");
        for (String n : names) {
            if (sb.length() > 1)
                sb.append(',');
            Json.quote(n, sb);
        }
        return sb.append(']').toString();
    }
}
